"""conftest.py: fixtures for weir's integration suite (see harness.py)."""

import pytest

from harness import ASAN, QUICK, Origin, Weir


def pytest_configure(config):
    config.addinivalue_line("markers", "large: 1 GiB transfers; skipped with WEIR_QUICK=1")
    # `make integration-asan` deselects these (-m "not normal_only"): tests
    # bound by wall-clock time whose code the rest of the suite exercises
    # under the sanitizers too, so that build would only run them slower
    config.addinivalue_line("markers", "normal_only: timing-bound; the normal build only")


def pytest_collection_modifyitems(config, items):
    if not QUICK:
        return
    skip = pytest.mark.skip(reason="WEIR_QUICK=1")
    for item in items:
        if "large" in item.keywords:
            item.add_marker(skip)


# ---------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for w in getattr(item, "_weirs", []):
            rep.sections.append(("weir logs (%s)" % w.dir, w.all_logs()))
        for o in getattr(item, "_origins", []):
            try:
                text = open(o.out_path).read()[-3000:]
            except OSError:
                text = ""
            if text:
                rep.sections.append(("origin %s stderr" % o.name, text))


@pytest.fixture
def origin_factory(request, tmp_path):
    started = []
    request.node._origins = started

    def make(name="A", port=0):
        o = Origin(tmp_path, name, port).start()
        started.append(o)
        return o

    yield make
    for o in started:
        o.stop()


@pytest.fixture
def origin(origin_factory):
    return origin_factory("A")


@pytest.fixture
def weir_factory(request, tmp_path):
    """make(upstreams=..., routes=..., ...) writes a config and starts weir;
    make(start=False, ...) only writes it."""
    started = []
    request.node._weirs = started
    n = [0]

    def make(start=True, **kw):
        n[0] += 1
        d = tmp_path / ("weir%d" % n[0])
        d.mkdir()
        w = Weir(d)
        w.write_config(**kw)
        started.append(w)
        if start:
            w.start()
        return w

    yield make
    for w in started:
        w.stop()
    if ASAN:
        reports = []
        for w in started:
            reports += w.sanitizer_reports()
        if reports:
            pytest.fail("sanitizer reports:\n" + "\n".join(reports[:20]))


@pytest.fixture
def weir(weir_factory, origin):
    """weir with one upstream "a" = the origin fixture, every path routed to it."""
    return weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                        routes=[{"path": "/", "upstream": "a"}])


