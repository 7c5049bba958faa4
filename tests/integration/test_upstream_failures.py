"""Upstream failures: 502 refused / closed / garbage / bad framing, passive
health (max_fails in a row mark a server down for fail_timeout; a group
whose servers are all marked is tried anyway: panic), local connect errors
(503, never counted against a server), 504 on upstream_read, failover,
retry of a stale pooled connection, responses cut short."""

import time

from harness import (Client, build_request, closed_port, error_response_ok, release_port, settle,
                     simple, slack, wait_until)


def counted(w, kinds, before, n=1):
    kinds = [kinds] if isinstance(kinds, str) else kinds

    def grown():
        m = w.metrics()
        return sum(m.error(k) - before.error(k) for k in kinds) >= n
    wait_until(grown, slack(2), what="weir_errors_total{kind in %r} to grow by %d" % (kinds, n))


def logged(w, before_lines, text=None):
    def found():
        lines = w.error_lines()[before_lines:]
        return lines if lines and (text is None or any(text in l for l in lines)) else None
    return wait_until(found, slack(2), what="an error-log line%s" % (
        " mentioning %r" % text if text else ""))


def dead_upstream(weir_factory, **kw):
    port = closed_port()
    w = weir_factory(upstreams=[{"name": "a", "servers": ["127.0.0.1:%d" % port]}],
                     routes=[{"path": "/", "upstream": "a"}], **kw)
    return w, port


def test_a_refused_upstream_gets_502(weir_factory):
    w, port = dead_upstream(weir_factory, workers=1)
    m0 = w.metrics()
    n0 = len(w.error_lines())
    with w.client() as c:
        r = c.request("GET", "/")
        error_response_ok(r, 502, "Bad Gateway", close=False)
    counted(w, "upstream_refused", m0)
    logged(w, n0, "127.0.0.1:%d" % port)


def test_a_one_server_group_whose_server_refused_once_is_served_on_the_next_request(weir_factory, origin_factory):
    w, port = dead_upstream(weir_factory, workers=1)
    m0 = w.metrics()
    with w.client() as c:
        error_response_ok(c.request("GET", "/"), 502, "Bad Gateway", close=False)
    release_port(port)
    o = origin_factory("back", port=port)
    with w.client() as c:
        r = c.request("GET", "/echo")
    assert r.status == 200 and r.get("X-Origin") == "back", r
    assert o.requests("/echo")
    m1 = w.metrics()
    assert m1.error("no_server") == m0.error("no_server")
    assert m1("weir_upstream_marked_down_total") == m0("weir_upstream_marked_down_total")


def test_max_fails_refusals_in_a_row_mark_a_server_down_and_panic_mode_still_tries_it(weir_factory,
                                                                                      origin_factory):
    w, port = dead_upstream(weir_factory, workers=1)
    m0 = w.metrics()
    n0 = len(w.error_lines())
    with w.client() as c:
        for _ in range(3):  # max_fails defaults to 3
            error_response_ok(c.request("GET", "/"), 502, "Bad Gateway", close=False)
    m1 = w.metrics()
    assert m1("weir_upstream_marked_down_total") - m0("weir_upstream_marked_down_total") == 1
    assert m1.error("upstream_refused") - m0.error("upstream_refused") == 3
    assert m1("weir_upstream_panic_total") == m0("weir_upstream_panic_total")
    logged(w, n0, "3 failures in a row")
    # marked down, the only server: tried anyway (a 502 again, not a 503)
    n1 = len(w.error_lines())
    with w.client() as c:
        error_response_ok(c.request("GET", "/"), 502, "Bad Gateway", close=False)
    m2 = w.metrics()
    assert m2("weir_upstream_panic_total") - m1("weir_upstream_panic_total") == 1
    assert m2.error("no_server") == m0.error("no_server")
    logged(w, n1, "panic")
    # it comes back: the panic pick reaches it, and the success lifts the mark
    release_port(port)
    origin_factory("back", port=port)
    with w.client() as c:
        r = c.request("GET", "/echo")
        assert r.status == 200 and r.get("X-Origin") == "back", r
        r = c.request("GET", "/echo/again")
        assert r.status == 200, r
    with w.client() as c:
        assert c.request("GET", "/echo/fresh").status == 200
    m3 = w.metrics()
    assert m3("weir_upstream_panic_total") - m2("weir_upstream_panic_total") == 1
    assert m3("weir_upstream_marked_down_total") == m1("weir_upstream_marked_down_total")


def test_max_fails_0_never_marks_a_server_down(weir_factory):
    port = closed_port()
    w = weir_factory(workers=1, upstreams=[{"name": "a", "servers": ["127.0.0.1:%d" % port], "max_fails": 0}],
                     routes=[{"path": "/", "upstream": "a"}])
    m0 = w.metrics()
    with w.client() as c:
        for _ in range(6):
            assert c.request("GET", "/").status == 502
    m1 = w.metrics()
    assert m1("weir_upstream_marked_down_total") == m0("weir_upstream_marked_down_total")
    assert m1("weir_upstream_panic_total") == m0("weir_upstream_panic_total")


def test_a_server_marked_down_is_skipped_for_fail_timeout_then_tried_again(weir_factory, origin):
    port = closed_port()
    w = weir_factory(workers=1, upstreams=[{"name": "g", "servers": ["127.0.0.1:%d" % port, origin.addr],
                                            "max_fails": 1, "fail_timeout": "2s"}],
                     routes=[{"path": "/", "upstream": "g"}])
    m0 = w.metrics()
    t = time.monotonic()
    with w.client() as c:
        for _ in range(6):
            r = c.request("GET", "/echo")
            assert r.status == 200 and r.get("X-Origin") == "A", r
    m1 = w.metrics()
    if time.monotonic() - t < 1.5:  # the window did not pass on a slow machine
        assert m1("weir_upstream_marked_down_total") - m0("weir_upstream_marked_down_total") == 1
        assert m1("weir_upstream_panic_total") == m0("weir_upstream_panic_total")
    time.sleep(2.2)
    with w.client() as c:
        for _ in range(3):
            assert c.request("GET", "/echo").status == 200
    m2 = w.metrics()
    assert m2("weir_upstream_marked_down_total") - m1("weir_upstream_marked_down_total") >= 1


def test_a_refused_server_is_skipped_and_the_request_goes_to_another(weir_factory, origin):
    port = closed_port()
    w = weir_factory(workers=1,
                     upstreams=[{"name": "g", "servers": ["127.0.0.1:%d" % port, origin.addr]}],
                     routes=[{"path": "/", "upstream": "g"}])
    with w.client() as c:
        for _ in range(10):
            r = c.request("GET", "/echo")
            assert r.status == 200 and r.get("X-Origin") == "A", r
    assert len(origin.requests("/echo")) == 10


def test_an_upstream_that_closes_without_answering_gets_502(weir, origin):
    m0 = weir.metrics()
    n0 = len(weir.error_lines())
    with weir.client() as c:
        r = c.request("GET", "/close-early")
        error_response_ok(r, 502, "Bad Gateway", close=False)
        # the client connection is still usable
        assert c.request("GET", "/bytes/2").body == b"xx"
    counted(weir, "upstream_closed", m0)
    logged(weir, n0)
    assert 1 <= len(origin.requests("/close-early")) <= 2


def test_an_upstream_that_sends_garbage_gets_502(weir):
    m0 = weir.metrics()
    n0 = len(weir.error_lines())
    r = weir.get("/garbage")
    error_response_ok(r, 502, "Bad Gateway", close=False)
    counted(weir, "upstream_bad_response", m0)
    logged(weir, n0)


def test_an_upstream_with_a_two_digit_status_gets_502(weir):
    m0 = weir.metrics()
    r = weir.get("/bad/two-digit")
    error_response_ok(r, 502, "Bad Gateway", close=False)
    counted(weir, "upstream_bad_response", m0)


def test_an_upstream_response_with_content_length_and_transfer_encoding_gets_502(weir):
    m0 = weir.metrics()
    r = weir.get("/bad/cl-te")
    error_response_ok(r, 502, "Bad Gateway", close=False)
    counted(weir, ["upstream_bad_response", "bad_framing"], m0)


def test_an_upstream_response_with_two_content_lengths_gets_502(weir):
    m0 = weir.metrics()
    r = weir.get("/bad/cl-dup")
    error_response_ok(r, 502, "Bad Gateway", close=False)
    counted(weir, ["upstream_bad_response", "bad_framing"], m0)


def test_an_upstream_response_head_over_the_limit_gets_502(weir):
    m0 = weir.metrics()
    r = weir.get("/bad/huge-head")
    error_response_ok(r, 502, "Bad Gateway", close=False)
    counted(weir, "upstream_bad_response", m0)


def test_an_invalid_chunk_from_the_upstream_never_reaches_the_client_as_a_complete_response(weir):
    with weir.client() as c:
        c.send(build_request("GET", "/bad/chunk"))
        try:
            r = c.read_response(timeout=4)
        except AssertionError:
            # head passed on, then the response was cut: the connection must be closed
            assert c.eof
            return
        # otherwise weir caught it before sending anything: a 502
        error_response_ok(r, 502, "Bad Gateway", close=False)


def test_a_response_cut_short_by_the_upstream_closes_the_client_connection(weir):
    m0 = weir.metrics()
    with weir.client() as c:
        c.send(build_request("GET", "/cut/100000"))
        head = c.read_head()
        assert head.status == 200
        body = c.read_all(timeout=4)
        assert c.eof
        # a Content-Length response that cannot be completed must not look complete
        if head.get("Content-Length"):
            assert len(body) < int(head.get("Content-Length"))
        else:
            assert not body.endswith(b"0\r\n\r\n")
    counted(weir, ["response_cut", "upstream_closed"], m0)


def test_an_upstream_that_does_not_answer_gets_504_after_upstream_read(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"upstream_read": "1s"})
    m0 = w.metrics()
    n0 = len(w.error_lines())
    with w.client() as c:
        t = time.monotonic()
        r = c.request("GET", "/stall", timeout=5)
        took = time.monotonic() - t
        error_response_ok(r, 504, "Gateway Timeout", close=False)
        assert 0.8 <= took <= slack(3), took
        assert c.request("GET", "/bytes/1").body == b"x"
    counted(w, "upstream_timeout", m0)
    logged(w, n0)


def test_a_slow_upstream_over_upstream_read_gets_504_and_a_fast_enough_one_200(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"upstream_read": "1s"})
    with w.client() as c:
        assert c.request("GET", "/slow/300").status == 200
    with w.client() as c:
        assert c.request("GET", "/slow/2500", timeout=5).status == 504


def test_an_upstream_stalling_mid_body_cuts_the_response_after_upstream_read(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"upstream_read": "1s"})
    with w.client() as c:
        c.send(build_request("GET", "/stall-body/100000"))
        head = c.read_head()
        assert head.status == 200
        t = time.monotonic()
        body = c.read_all(timeout=5)
        assert c.eof, "weir kept the client waiting on a stalled upstream"
        assert time.monotonic() - t <= slack(3)
        assert len(body) < 100000


def test_a_pooled_connection_closed_by_the_origin_is_replaced_transparently(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    m0 = w.metrics()
    with w.client() as c:
        for _ in range(5):
            assert c.request("GET", "/keepalive-then-close").status == 200
            time.sleep(0.15)
            r = c.request("GET", "/echo")
            assert r.status == 200, r
    assert len(origin.requests("/echo")) == 5
    # the pool saw each close and dropped the connection: no request went
    # out on a dead one to be saved by a retry
    assert w.metrics()("weir_upstream_retries_total") == m0("weir_upstream_retries_total")


def test_a_stale_pooled_connection_is_retried_once_on_a_fresh_one(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    m0 = w.metrics()
    with w.client() as c:
        assert c.request("GET", "/close-on-next").status == 200
        # this request goes out on the pooled connection, which the origin
        # reads and closes without answering
        r = c.request("GET", "/echo")
        assert r.status == 200, r
        assert r.json()["seq"] == 1  # answered on a fresh origin connection
    settle()
    tries = origin.requests("/echo")
    assert [e.get("dropped", False) for e in tries] == [True, False]
    m1 = w.metrics()
    assert m1("weir_upstream_connects_total") - m0("weir_upstream_connects_total") == 2
    assert m1("weir_upstream_retries_total") - m0("weir_upstream_retries_total") == 1
    assert m1("weir_upstream_replays_refused_total") == m0("weir_upstream_replays_refused_total")


def sent_on_a_connection_the_origin_drops(weir_factory, origin, method, body):
    """<method> /echo on a pooled connection the origin reads the request
    from and then closes without answering; returns the answer, the
    origin's log entries for that method, and the metrics before and after."""
    w = simple(weir_factory, origin, workers=1)
    m0 = w.metrics()
    with w.client() as c:
        assert c.request("GET", "/close-on-next").status == 200
        r = c.request(method, "/echo", body=body)
    settle()
    return r, [e for e in origin.requests("/echo") if e["method"] == method], m0, w.metrics()


def test_a_post_whose_pooled_connection_closes_unanswered_is_not_sent_twice(weir_factory, origin):
    """As a backend that crashed running it would: the POST may have run,
    so weir answers 502 rather than run it again."""
    r, posts, m0, m1 = sent_on_a_connection_the_origin_drops(weir_factory, origin, "POST",
                                                             b"charge the card once")
    assert r.status == 502, r
    assert len(posts) == 1 and posts[0].get("dropped"), posts
    assert m1("weir_upstream_replays_refused_total") - m0("weir_upstream_replays_refused_total") == 1
    assert m1("weir_upstream_retries_total") == m0("weir_upstream_retries_total")
    assert m1.error("upstream_closed") - m0.error("upstream_closed") == 1


def test_a_put_whose_pooled_connection_closes_unanswered_is_sent_again(weir_factory, origin):
    """PUT is idempotent (RFC 9110 9.2.2): sent again, body and all."""
    r, puts, m0, m1 = sent_on_a_connection_the_origin_drops(weir_factory, origin, "PUT",
                                                            b"the same state twice")
    assert r.status == 200 and r.json()["body_len"] == 20, r
    assert [e.get("dropped", False) for e in puts] == [True, False]
    assert m1("weir_upstream_retries_total") - m0("weir_upstream_retries_total") == 1
    assert m1("weir_upstream_replays_refused_total") == m0("weir_upstream_replays_refused_total")


def test_the_bytes_after_a_complete_upstream_response_are_never_delivered_as_a_response(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    with w.client() as c:
        r = c.request("GET", "/bad/trailing")
        assert r.status == 200 and r.body == b"ok\n"
        for _ in range(3):
            r = c.request("GET", "/echo")
            assert r.status == 200 and not r.has("X-Injected"), r
            assert r.get("Content-Type") == "application/json"


def test_bytes_an_upstream_sends_while_its_answer_waits_on_the_client_unfit_the_connection(weir_factory, origin):
    """An HTTP/2 client with a 1 KiB window holds a 4 KiB answer that weir
    has read whole: the upstream's stray response meanwhile must not be
    taken for the next answer, and its connection is not kept."""
    from h2util import H2Client
    w = simple(weir_factory, origin, workers=1)
    c = H2Client(w.port, settings={1 << 2: 1024})  # INITIAL_WINDOW_SIZE
    try:
        sid = c.request("/bad/trailing-late/4096/200")
        # weir has all 4096 bytes, the client took 1024: the stray bytes
        # come at 200 ms while the rest waits for the window
        time.sleep(slack(0.6))
        m0 = w.metrics()
        r = c.wait([sid])[0]
        assert r["status"] == 200 and r["body"] == b"x" * 4096, r
        for _ in range(3):
            r = c.get("/echo")
            assert r["status"] == 200 and "x-injected" not in dict(r["headers"]), r
            assert dict(r["headers"]).get("content-type") == "application/json"
        # one connection for the three: the first was not kept
        assert w.metrics()("weir_upstream_connects_total") - m0("weir_upstream_connects_total") == 1
    finally:
        c.close()


def test_an_upstream_failure_on_one_client_does_not_affect_others(weir_factory, origin):
    # a worker held up by the stalled request would answer the others only
    # after its 30 s upstream_read: a bound far below that proves it is not
    w = simple(weir_factory, origin, timeouts={"upstream_read": "30s"})
    stalled = Client(w.port)
    stalled.send(build_request("GET", "/stall"))
    try:
        for _ in range(5):
            t = time.monotonic()
            assert w.get("/echo").status == 200
            assert time.monotonic() - t < slack(10)
    finally:
        stalled.close()


def test_a_group_whose_servers_all_refuse_gets_502_and_is_still_tried_once_all_are_marked(weir_factory):
    p1, p2 = closed_port(), closed_port()
    w = weir_factory(workers=1, upstreams=[{"name": "a", "servers": [
        "127.0.0.1:%d" % p1, "127.0.0.1:%d" % p2]}], routes=[{"path": "/", "upstream": "a"}])
    m0 = w.metrics()
    with w.client() as c:
        for _ in range(4):  # each request tries both; the third marks both down
            assert c.request("GET", "/").status == 502
    m1 = w.metrics()
    assert m1("weir_upstream_marked_down_total") - m0("weir_upstream_marked_down_total") == 2
    assert m1("weir_upstream_panic_total") - m0("weir_upstream_panic_total") >= 1
    assert m1.error("no_server") == m0.error("no_server")


SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* connect() to the port in WEIR_TEST_EADDRNOTAVAIL_PORT fails with
 * EADDRNOTAVAIL (no ephemeral port left) while the file named by
 * WEIR_TEST_EADDRNOTAVAIL_FLAG exists */
int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	static int (*real)(int, const struct sockaddr *, socklen_t);
	const char *flag = getenv("WEIR_TEST_EADDRNOTAVAIL_FLAG");
	const char *port = getenv("WEIR_TEST_EADDRNOTAVAIL_PORT");

	if (!real)
		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
	if (flag && port && sa->sa_family == AF_INET &&
	    ntohs(((const struct sockaddr_in *)sa)->sin_port) == atoi(port) && access(flag, F_OK) == 0) {
		errno = EADDRNOTAVAIL;
		return -1;
	}
	return real(fd, sa, len);
}
"""


def test_a_local_connect_error_gets_503_and_never_counts_against_the_server(weir_factory, origin, tmp_path,
                                                                             monkeypatch):
    """Out of ephemeral ports (EADDRNOTAVAIL, injected by an LD_PRELOAD
    shim around connect()) is weir's trouble, not the server's: 503 with
    its own kind, one log line per second, and the server is not marked
    down however often it happens."""
    import shutil
    import subprocess
    from harness import ASAN
    cc = shutil.which("cc") or shutil.which("gcc")
    src, so, flag = tmp_path / "shim.c", tmp_path / "shim.so", tmp_path / "no-ports"
    src.write_text(SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(src), "-ldl"], check=True, timeout=60)
    w = weir_factory(start=False, workers=1, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    monkeypatch.setenv("LD_PRELOAD", str(so))
    monkeypatch.setenv("WEIR_TEST_EADDRNOTAVAIL_PORT", str(origin.port))
    monkeypatch.setenv("WEIR_TEST_EADDRNOTAVAIL_FLAG", str(flag))
    if ASAN:
        monkeypatch.setenv("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1:halt_on_error=1:verify_asan_link_order=0")
    w.start()
    monkeypatch.undo()
    m0 = w.metrics()
    n0 = len(w.error_lines())
    flag.write_text("")
    with w.client() as c:
        for _ in range(5):  # more than max_fails (3)
            error_response_ok(c.request("GET", "/"), 503, "Service Unavailable", close=False)
    counted(w, "local_connect_error", m0, 5)
    lines = logged(w, n0, "not counted against the server")
    assert len([l for l in lines if "not counted against the server" in l]) == 1, lines  # rate-limited
    m1 = w.metrics()
    assert m1.error("upstream_refused") == m0.error("upstream_refused")
    assert m1("weir_upstream_marked_down_total") == m0("weir_upstream_marked_down_total")
    flag.unlink()
    with w.client() as c:
        r = c.request("GET", "/echo")
        assert r.status == 200 and r.get("X-Origin") == "A", r
    m2 = w.metrics()
    assert m2("weir_upstream_panic_total") == m0("weir_upstream_panic_total")  # it was never marked
