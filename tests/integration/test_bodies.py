"""Request and response bodies: Content-Length and chunked both ways, HEAD,
204/304, Expect: 100-continue, streaming."""

import hashlib
import os
import shutil
import signal
import subprocess
import time

import pytest

from harness import Client, build_request, chunked, header_values, settle, simple, slack, wait_until


def sha(b):
    return hashlib.sha256(b).hexdigest()


def test_a_content_length_request_body_reaches_the_origin_intact(weir, origin):
    data = os.urandom(300000)
    with weir.client() as c:
        r = c.request("POST", "/upload", body=data)
    assert r.status == 200
    assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}
    e = origin.requests("/upload")[-1]
    assert header_values(e, "content-length") == [str(len(data))]


def test_a_chunked_request_body_reaches_the_origin_rechunked_with_the_same_content(weir, origin):
    data = os.urandom(200000)
    body = chunked(data, 7777, ";foo=bar")
    with weir.client() as c:
        r = c.request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")], body=body)
    assert r.status == 200
    assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}
    e = origin.requests("/upload")[-1]
    te = [v.lower() for v in header_values(e, "transfer-encoding")]
    cl = header_values(e, "content-length")
    assert te == ["chunked"] or cl == [str(len(data))], e["headers"]


def test_an_empty_chunked_request_body_arrives_as_an_empty_body(weir, origin):
    with weir.client() as c:
        r = c.request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")],
                      body=b"0\r\n\r\n")
        assert r.json()["body_len"] == 0
        # the connection is still in sync afterwards
        assert c.request("GET", "/bytes/4").body == b"xxxx"


def test_a_chunked_request_body_with_trailers_is_forwarded_and_the_connection_stays_usable(weir, origin):
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Check: 1\r\n\r\n"
    with weir.client() as c:
        r = c.request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")], body=body)
        assert r.json() == {"body_len": 11, "body_sha256": sha(b"hello world")}
        assert c.request("GET", "/bytes/2").body == b"xx"


def test_a_request_body_sent_in_small_pieces_is_streamed_through(weir, origin):
    data = os.urandom(50000)
    with weir.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", str(len(data)))]))
        for i in range(0, len(data), 997):
            c.send(data[i:i + 997])
        r = c.read_response()
    assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}


def test_a_zero_content_length_post_is_forwarded_without_a_body(weir, origin):
    with weir.client() as c:
        r = c.request("POST", "/upload", body=b"")
        assert r.json()["body_len"] == 0
        assert c.request("GET", "/bytes/1").body == b"x"


def test_a_content_length_response_keeps_its_content_length(weir):
    with weir.client() as c:
        r = c.request("GET", "/bytes/123456")
        assert r.get_all("Content-Length") == ["123456"] and not r.chunked
        assert r.body == b"x" * 123456


def test_a_chunked_response_is_rechunked_to_an_http11_client(weir):
    with weir.client() as c:
        r = c.request("GET", "/chunked/10500")
        assert r.status == 200 and r.chunked
        assert r.body == b"x" * 10500
        assert c.request("GET", "/bytes/3").body == b"xxx"


def test_a_read_to_close_response_becomes_chunked_and_the_client_connection_stays_open(weir):
    with weir.client() as c:
        r = c.request("GET", "/close/5000")
        assert r.status == 200
        assert r.chunked, r
        assert r.body == b"x" * 5000
        assert c.request("GET", "/bytes/3").body == b"xxx"


def test_a_head_response_has_the_content_length_but_no_body(weir):
    with weir.client() as c:
        r = c.request("HEAD", "/head-test")
        assert r.status == 200 and r.get("Content-Length") == "5"
        # the next response starts right away: no stray body bytes
        r = c.request("GET", "/head-test")
        assert r.body == b"hello"


def test_204_and_304_responses_have_no_body_and_keep_the_connection(weir):
    with weir.client() as c:
        for code in (204, 304):
            r = c.request("GET", "/status/%d" % code)
            assert r.status == code
            assert not r.has("Transfer-Encoding")
        assert c.request("GET", "/bytes/2").body == b"xx"


def test_other_status_codes_from_the_origin_pass_through(weir):
    with weir.client() as c:
        for code in (201, 301, 404, 418, 500, 503):
            r = c.request("GET", "/status/%d" % code)
            assert r.status == code and r.body == b"status %d\n" % code


def test_an_interim_103_from_the_origin_is_followed_by_the_final_response(weir):
    with weir.client() as c:
        r = c.request("GET", "/status/103")
        assert r.status == 200 and r.body == b"final\n"
        assert all(i.status == 103 for i in r.interim)
        assert c.request("GET", "/bytes/1").body == b"x"


def test_expect_100_continue_is_answered_by_weir_before_the_body_is_sent(weir, origin):
    data = b"0123456789" * 100
    with weir.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", str(len(data))),
                                                         ("Expect", "100-continue")]))
        head = c.read_head(deadline=time.monotonic() + slack(3))
        assert head.status == 100, head
        assert head.raw_head.startswith(b"HTTP/1.1 100 Continue\r\n")
        c.send(data)
        r = c.read_response()
        assert r.status == 200
        assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}
    e = origin.requests("/upload")[-1]
    assert header_values(e, "expect") == []


def test_expect_100_continue_with_a_chunked_body_works(weir, origin):
    with weir.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Transfer-Encoding", "chunked"),
                                                         ("Expect", "100-continue")]))
        head = c.read_head(deadline=time.monotonic() + slack(3))
        assert head.status == 100
        c.send(chunked(b"abc" * 1000, 500))
        r = c.read_response()
        assert r.json()["body_len"] == 3000
    assert header_values(origin.requests("/upload")[-1], "expect") == []


def test_a_response_body_is_streamed_to_the_client_before_the_origin_finishes(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"upstream_read": "3s"})
    with w.client() as c:
        t0 = time.monotonic()
        c.send(build_request("GET", "/drip/3/800"))
        head = c.read_head()
        # the first chunk "tick 0" arrives long before the whole body (1.6 s)
        while b"tick 0" not in c.buf:
            c._fill(time.monotonic() + slack(2))
        first = time.monotonic() - t0
        assert first < slack(0.7), first
        assert head.status == 200


def test_a_slow_reader_gets_the_whole_response_even_when_it_takes_longer_than_upstream_read(
        weir_factory, origin):
    # weir pauses reading the origin while the client is slow (back-pressure);
    # that pause is not the origin being idle, so no 504 and no cut
    w = simple(weir_factory, origin, timeouts={"upstream_read": "1s"})
    size = 32 * 1024 * 1024  # well over what the socket buffers hold
    with Client(w.port, timeout=10, rcvbuf=65536) as c:
        c.send(build_request("GET", "/bytes/%d" % size))
        got = bytearray()
        t = time.monotonic()
        r = c.read_head()
        assert r.status == 200
        while len(got) < size and time.monotonic() - t < slack(20):
            # about 10 MB/s: the transfer lasts over 3 s
            want = min(size - len(got), 1024 * 1024)
            while want > 0:
                if not c.buf:
                    c._fill(time.monotonic() + slack(5))
                take = min(want, len(c.buf))
                got += c.buf[:take]
                del c.buf[:take]
                want -= take
            time.sleep(0.1)
        assert time.monotonic() - t > 1.5
        assert len(got) == size and got.count(b"x") == size, len(got)
        assert c.request("GET", "/bytes/2").body == b"xx"


def test_a_request_body_and_its_response_body_of_a_few_megabytes_round_trip(weir, origin):
    data = os.urandom(8 * 1024 * 1024)
    with weir.client(timeout=30) as c:
        r = c.request("POST", "/upload", body=data)
        assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}
        r = c.request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")],
                      body=chunked(data, 65536))
        assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}
    settle()


def test_head_of_a_chunked_resource_does_not_wait_for_a_body(weir):
    with weir.client() as c:
        r = c.request("HEAD", "/chunked/5000", timeout=1.5)
        assert r.status == 200
        r = c.request("HEAD", "/bytes/5000", timeout=1.5)
        assert r.status == 200 and r.get("Content-Length") == "5000"
        assert c.request("GET", "/bytes/2", timeout=1.5).body == b"xx"


def test_a_304_carrying_a_content_length_is_passed_on_without_waiting_for_a_body(weir):
    with weir.client() as c:
        r = c.request("GET", "/304cl", timeout=1.5)
        assert r.status == 304 and r.get("ETag") == '"v1"'
        assert c.request("GET", "/bytes/2", timeout=1.5).body == b"xx"


def test_a_client_that_sends_its_body_without_waiting_for_100_continue_is_served(weir, origin):
    data = b"q" * 3000
    with weir.client() as c:
        c.send(build_request("POST", "/upload", headers=[("Expect", "100-continue")], body=data))
        r = c.read_response()
        assert r.status == 200 and r.json()["body_len"] == 3000
        assert all(i.status == 100 for i in r.interim)
        assert c.request("GET", "/bytes/1").body == b"x"


def test_a_chunked_response_with_extensions_and_trailers_arrives_with_the_right_body(weir):
    with weir.client() as c:
        r = c.request("GET", "/chunked-ext")
        assert r.status == 200 and r.body == b"hello world"
        assert c.request("GET", "/bytes/1").body == b"x"


WRITES = ("sendmsg", "sendto", "writev", "write")


def writes_during(pid, action, calls=WRITES):
    """Runs <action>() with strace counting the <calls> (by default the
    write calls) of process <pid>; returns (action's result, number of
    calls)."""
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".strace.%d" % os.getpid())
    st = subprocess.Popen(["strace", "-qq", "-c", "--seccomp-bpf", "-o", out, "-e", "trace=" + ",".join(calls),
                           "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: proc_status_line(pid, "TracerPid") not in (None, "0"), slack(5),
                   what="strace attached")
        result = action()
    finally:
        st.send_signal(signal.SIGINT)
        st.wait(timeout=slack(10))
    with open(out) as f:
        text = f.read()
    os.unlink(out)
    n = 0
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[-1] in calls:
            n += int(parts[3])  # % time, seconds, usecs/call, calls, [errors], name
    return result, n


def proc_status_line(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split()[1]
    except OSError:
        return None
    return None


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_a_body_of_one_byte_chunks_goes_upstream_in_few_writes(weir_factory, origin):
    """64 KiB in 1-byte chunks is 384 KiB of framing and data: the decoded
    bytes of many chunks leave in one write, not one write per chunk."""
    # strace slows the worker down: the body must not time out under it
    w = simple(weir_factory, origin, workers=1,
               timeouts={"client_header": "60s", "client_body": "60s", "upstream_send": "60s"})
    data = os.urandom(65536)
    body = chunked(data, size=1)
    (worker,) = w.worker_pids()

    def upload():
        with w.client(timeout=slack(20)) as c:
            c.send(build_request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")]) + body)
            return c.read_response(timeout=slack(20))

    r, writes = writes_during(worker, upload)
    assert r.status == 200
    assert r.json() == {"body_len": len(data), "body_sha256": sha(data)}
    assert writes < 64, "%d writes for 64 KiB of body" % writes


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_a_response_of_one_byte_chunks_reaches_the_client_in_few_writes(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, timeouts={"upstream_read": "60s"})
    (worker,) = w.worker_pids()

    def download():
        with w.client(timeout=slack(20)) as c:
            return c.request("GET", "/tiny-chunks/65536", timeout=slack(20))

    r, writes = writes_during(worker, download)
    assert r.status == 200 and r.body == b"x" * 65536
    assert writes < 64, "%d writes for 64 KiB of body" % writes


def test_a_chunked_response_ending_in_a_read_of_its_own_ends_cleanly_for_http10(weir_factory, origin):
    """To an HTTP/1.0 client the body goes bare: the last chunk alone adds
    nothing to write, and its framing must still be consumed, not left in
    the buffer to look like bytes past the response."""
    w = simple(weir_factory, origin, workers=1)
    m0 = w.metrics()
    with w.client() as c:
        r = c.request("GET", "/drip/2/100/end-late", version="1.0")
    assert r.status == 200 and r.body == b"tick 0\ntick 1\n"
    settle()
    assert w.metrics().error("upstream_bad_response") == m0.error("upstream_bad_response")
