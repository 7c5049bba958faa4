"""Access log (one line per request) and error log."""

import re

from harness import build_request, closed_port, simple, slack, wait_until


def wait_lines(w, n):
    return wait_until(lambda: (lambda l: l if len(l) >= n else None)(w.access_lines()),
                      slack(3), what="%d access-log lines" % n)


def has_word(line, word):
    return re.search(r"(^|[\s\"'\[(=,;])%s($|[\s\"'\])=,;])" % re.escape(str(word)), line)


def test_each_request_writes_one_access_log_line_with_its_details(weir, origin):
    with weir.client() as c:
        r = c.request("GET", "/bytes/1234?q=1")
    assert r.status == 200
    lines = wait_lines(weir, 1)
    assert len(lines) == 1, lines
    line = lines[0]
    assert "127.0.0.1" in line
    assert has_word(line, "GET"), line
    assert "/bytes/1234?q=1" in line
    assert has_word(line, "200"), line
    # bytes: the body or the whole response
    assert has_word(line, 1234) or has_word(line, len(r.raw_head) + 1234), line
    assert origin.addr in line, line


def test_the_access_log_has_exactly_one_line_per_request_including_errors(weir_factory, origin):
    w = simple(weir_factory, origin, limits={"uri_size": "1k"})
    with w.client() as c:
        for i in range(5):
            assert c.request("GET", "/n/%d" % i).status == 200
        assert c.request("POST", "/upload", body=b"abc").status == 200
    with w.client() as c:
        c.send(build_request("GET", "/" + "u" * 2000))
        assert c.read_response().status == 414
    lines = wait_lines(w, 7)
    settle_lines = w.access_lines()
    assert len(settle_lines) == 7, settle_lines
    assert sum(1 for l in lines if has_word(l, "POST") and "/upload" in l) == 1
    assert sum(1 for l in lines if has_word(l, "414")) == 1


def test_an_upstream_error_is_in_the_access_log_with_the_upstream_address(weir_factory):
    port = closed_port()
    w = weir_factory(upstreams=[{"name": "a", "servers": ["127.0.0.1:%d" % port]}],
                     routes=[{"path": "/", "upstream": "a"}])
    assert w.get("/down").status == 502
    lines = wait_lines(w, 1)
    assert has_word(lines[0], "502") and "/down" in lines[0]
    assert "127.0.0.1:%d" % port in lines[0]


def test_an_upstream_failure_writes_an_error_log_line_naming_the_server(weir_factory):
    port = closed_port()
    w = weir_factory(upstreams=[{"name": "a", "servers": ["127.0.0.1:%d" % port]}],
                     routes=[{"path": "/", "upstream": "a"}])
    n0 = len(w.error_lines())
    assert w.get("/").status == 502
    wait_until(lambda: any("127.0.0.1:%d" % port in l for l in w.error_lines()[n0:]),
               slack(3), what="error-log line naming the upstream")


def test_a_successful_request_writes_nothing_to_the_error_log_at_level_warn(weir_factory, origin):
    w = simple(weir_factory, origin, level="warn")
    n0 = len(w.error_lines())
    for _ in range(5):
        assert w.get("/echo").status == 200
    wait_lines(w, 5)
    assert w.error_lines()[n0:] == []
