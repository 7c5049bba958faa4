"""Access log (one line per request) and error log."""

import os
import re
import time

import pytest

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


def with_logs_on_stderr(w, access="off"):
    """Points w's error log (and <access>) at stderr in its config."""
    with open(w.conf) as f:
        text = f.read()
    text, n = re.subn(r'log = \{[^}]*\};', 'log = { error = "stderr"; access = "%s"; level = "info"; };'
                      % access, text)
    assert n == 1, text
    with open(w.conf, "w") as f:
        f.write(text)


def fill_pipe(wfd):
    """Fills the pipe of write end <wfd> through a description of our own
    (O_NONBLOCK on <wfd> itself would be shared with weir's stderr)."""
    fd = os.open("/proc/self/fd/%d" % wfd, os.O_WRONLY | os.O_NONBLOCK)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)


def log_dropped(w):
    m = w.metrics()
    return sum(v for (name, _), v in m.samples.items() if name == "weir_log_dropped_total")


@pytest.mark.parametrize("access", ["off", "stderr"])
def test_a_log_reader_that_never_reads_does_not_stall_the_workers(weir_factory, access):
    """The error log (and the access log, in the second run) is stderr, a
    pipe nobody reads, full before the first request; the only server
    refuses connections, so every request is an error with a log line. A
    worker that waits for the pipe answers none."""
    down = "127.0.0.1:%d" % closed_port()
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [down]}],
                     routes=[{"path": "/", "upstream": "a"}], workers=1)
    with_logs_on_stderr(w, access)
    rfd, wfd = os.pipe()
    try:
        w.stderr = wfd
        w.start()
        fill_pipe(wfd)
        answered = 0
        end = time.monotonic() + slack(20)
        with w.client(timeout=5) as c:
            while answered < 3000 and time.monotonic() < end:
                r = c.request("GET", "/down/%d" % answered)
                assert r.status in (502, 503), r
                answered += 1
        assert answered == 3000, "only %d requests answered in %.0f s" % (answered, slack(20))
        # the held-back repeats are counted (and published at the next tick)
        wait_until(lambda: log_dropped(w) > 0, slack(3), what="weir_log_dropped_total > 0")
        if access == "stderr":
            wait_until(lambda: w.metrics()("weir_log_dropped_total", log="access", reason="blocked") > 0,
                       slack(3), what="access lines dropped")
        assert w.get("/").status in (502, 503)  # still responsive
    finally:
        w.stop()
        os.close(rfd)
        os.close(wfd)
