"""Trailers end to end (worker/h1/h1.h, its trailers section; worker/h2/h2_trailers.h): a
chunked body's trailer section goes to the other side when that side's
body is chunked too (HTTP/1 both ways, and HTTP/2 as a trailing HEADERS),
with the fields RFC 9110 6.5.1 keeps out of trailers dropped and counted;
a length-framed, HTTP/1.0 or compressed body drops them; "TE: trailers"
alone of the client's TE reaches the upstream (gRPC)."""

import json
import time
import zlib

import hpack
import pytest
from hyperframe import frame as hf

from harness import Client, build_request, fetch_metrics, header_values, slack
from h2util import H2Client, RawH2, request_headers


def chunked_post(target, trailers, body=b"hello world", headers=()):
    """A chunked POST whose trailer section is <trailers> (bytes, the
    field lines without the final CRLF)."""
    head = build_request("POST", target, headers=[("Transfer-Encoding", "chunked")] + list(headers))
    return head + b"5\r\n" + body[:5] + b"\r\n%x\r\n" % len(body[5:]) + body[5:] + b"\r\n0\r\n" + \
        trailers + b"\r\n"


def dropped(w):
    return fetch_metrics(w.stats_port).error("trailer_dropped")


def test_request_and_response_trailers_pass_byte_for_byte_over_http1(weir, origin):
    tr = b"X-Checksum: abc123\r\nGrpc-Status:0\r\nX-Spaced:  two  words \t\r\n"
    with weir.client() as c:
        c.send(chunked_post("/trailers?t=X-Sum:%2011", tr))
        r = c.read_response()
        assert r.status == 200 and r.chunked and r.body == b"trailers\n"
        # the origin's trailers, echoed: the client's then its own
        assert r.trailer_raw == tr + b"X-Sum: 11\r\n"
        assert ("Grpc-Status", "0") in r.trailers
        # the connection is in sync after them
        assert c.request("GET", "/bytes/3").body == b"xxx"
    e = origin.requests("/trailers")[0]
    assert e["body_len"] == 11 and e["trailer_raw"] == tr.decode()


@pytest.mark.parametrize("body_buffer", [65536, 0])
def test_a_trailer_section_that_comes_in_pieces_is_forwarded_whole(weir_factory, origin, body_buffer):
    # body_buffer 0: the body streams, the section goes from the client's
    # input buffer; else it is read whole first and copied behind it
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}],
                     limits={"body_buffer": body_buffer})
    tr = b"X-A: 1\r\nX-Long: " + b"v" * 3000 + b"\r\nX-B: 2\r\n"
    raw = chunked_post("/trailers", tr)
    cut = raw.index(b"0\r\n", len(raw) - len(tr) - 10)
    with w.client() as c:
        c.send(raw[:cut + 5])
        for i in range(cut + 5, len(raw), 700):  # the section in many reads
            time.sleep(0.02)
            c.send(raw[i:i + 700])
        r = c.read_response()
    assert r.status == 200 and r.trailer_raw == tr
    assert origin.requests("/trailers")[0]["trailer_raw"] == tr.decode()


@pytest.mark.parametrize("body_buffer", [65536, 0])
def test_refused_trailer_fields_are_dropped_and_counted_both_ways(weir_factory, origin, body_buffer):
    weir = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                        routes=[{"path": "/", "upstream": "a"}], limits={"body_buffer": body_buffer})
    before = dropped(weir)
    tr = (b"Content-Length: 5\r\nX-Ok: 1\r\nHost: evil.example\r\nTransfer-Encoding: chunked\r\n"
          b"TE: trailers\r\nX-Ok-2: 2\r\n")
    with weir.client() as c:
        c.send(chunked_post("/trailers?t=Set-Cookie:%20a=b&t=X-Good:%201&t=Content-Type:%20text/html", tr))
        r = c.read_response()
        assert r.status == 200 and r.body == b"trailers\n"
        assert r.trailer_raw == b"X-Ok: 1\r\nX-Ok-2: 2\r\nX-Good: 1\r\n"
        assert c.request("GET", "/bytes/2").body == b"xx"
    assert origin.requests("/trailers")[0]["trailer_raw"] == "X-Ok: 1\r\nX-Ok-2: 2\r\n"
    assert dropped(weir) == before + 6


@pytest.mark.parametrize("body_buffer", [65536, 0])
def test_trailer_fields_past_64_are_dropped_and_counted(weir_factory, origin, body_buffer):
    # a trailer section crosses as a header list of at most 64 fields
    # (worker/h1/h1.h, trailers): the fields past it are dropped as refused
    # ones are, the first 64 kept in their order
    weir = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                        routes=[{"path": "/", "upstream": "a"}], limits={"body_buffer": body_buffer})
    before = dropped(weir)
    lines = [b"X-F%d: %d\r\n" % (i, i) for i in range(70)]
    with weir.client() as c:
        c.send(chunked_post("/trailers", b"".join(lines)))
        r = c.read_response()
        assert r.status == 200 and r.trailer_raw == b"".join(lines[:64])
    assert origin.requests("/trailers")[0]["trailer_raw"] == b"".join(lines[:64]).decode()
    assert dropped(weir) == before + 6


def test_a_trailer_section_past_16_kib_is_still_a_400(weir, origin):
    before = fetch_metrics(weir.stats_port).error("bad_framing")
    with weir.client() as c:
        c.send(chunked_post("/upload", b"X-Big: " + b"v" * 17000 + b"\r\n"))
        r = c.read_response()
        assert r.status == 400
        assert c.closed_by_peer()
    assert fetch_metrics(weir.stats_port).error("bad_framing") == before + 1


def test_a_response_trailer_section_past_16_kib_still_cuts_the_response(weir, origin):
    before = fetch_metrics(weir.stats_port).error("upstream_bad_response")
    with weir.client() as c:
        c.send(build_request("GET", "/trailers?big=17000"))
        raw = c.read_all(timeout=5)
    # the head may have left before the body came: never the last chunk
    assert raw == b"" or raw.startswith(b"HTTP/1.1 200 "), raw
    assert b"\r\n0\r\n" not in raw and b"X-Big" not in raw
    assert fetch_metrics(weir.stats_port).error("upstream_bad_response") == before + 1


def test_an_http10_client_gets_the_body_without_the_trailers(weir, origin):
    with weir.client() as c:
        raw = build_request("GET", "/trailers?t=X-A:%201")
        c.send(raw.replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1))
        r = c.read_response()
    assert r.status == 200 and not r.chunked and r.body == b"trailers\n"
    # and a length-framed request has no trailers to pass
    with weir.client() as c:
        r = c.request("POST", "/trailers", body=b"abc")
        assert r.status == 200 and r.trailer_raw == b""


def test_a_compressed_response_drops_the_trailers_and_keeps_the_body(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}], extra="compress = { };")
    text = "trailers and more words " * 200
    with Client(w.port, timeout=slack(10)) as c:
        c.send(build_request("GET", "/trailers?type=text/plain&t=X-A:%201&body=" + text.replace(" ", "%20"),
                             headers=[("Accept-Encoding", "gzip")]))
        r = c.read_response()
    assert r.status == 200 and r.get("content-encoding") == "gzip" and r.chunked
    assert r.trailers == []
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert d.decompress(r.body) + d.flush() == text.encode()


def test_te_trailers_alone_reaches_the_origin(weir, origin):
    for te, want in (("trailers", ["trailers"]), ("gzip", []), ("deflate;q=0.5, Trailers", ["trailers"]),
                     ("trailersx", [])):
        with weir.client() as c:
            r = c.request("GET", "/echo", headers=[("TE", te), ("Connection", "te")])
        assert r.status == 200
        assert header_values(r.json(), "te") == want, te


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.parametrize("body_buffer", [65536, 0])
def test_http2_request_trailers_reach_the_origin_and_response_trailers_come_back(weir_factory, origin, body_buffer,
                                                                                 late):
    weir = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                        routes=[{"path": "/", "upstream": "a"}], limits={"body_buffer": body_buffer})
    before = dropped(weir)
    c = H2Client(weir.port)
    sid = c.request("/trailers?t=X-Sum:%2011&t=Set-Cookie:%20x", method="POST", body=b"hello", end=False,
                    headers=[("te", "trailers"), ("content-type", "application/grpc")])
    if late:  # the body handed up first, the trailers alone after it
        c.read_some(0.2)
    c.conn.send_headers(sid, [("grpc-status", "0"), ("x-checksum", "abc")], end_stream=True)
    c.flush()
    r = c.wait([sid])[0]
    assert r["status"] == 200 and r["ended"] and r["body"] == b"trailers\n"
    # the origin's section as a trailing HEADERS, names lower case
    assert r["trailers"] == [("grpc-status", "0"), ("x-checksum", "abc"), ("x-sum", "11")]
    e = origin.requests("/trailers")[0]
    assert e["body_len"] == 5 and e["trailer_raw"] == "grpc-status: 0\r\nx-checksum: abc\r\n"
    assert header_values(e, "te") == ["trailers"]
    assert dropped(weir) == before + 1  # Set-Cookie
    c.close()


def test_http2_request_trailer_fields_past_64_are_dropped_and_counted(weir, origin):
    # the HTTP/2 server codec keeps a client's trailing HEADERS as a list
    # of at most 64 fields, as HTTP/1's reader does
    before = dropped(weir)
    c = H2Client(weir.port)
    sid = c.request("/trailers", method="POST", body=b"hello", end=False, headers=[("te", "trailers")])
    c.conn.send_headers(sid, [("x-f%d" % i, str(i)) for i in range(70)], end_stream=True)
    c.flush()
    r = c.wait([sid])[0]
    c.close()
    assert r["status"] == 200 and r["ended"]
    e = origin.requests("/trailers")[0]
    assert e["trailer_raw"] == "".join("x-f%d: %d\r\n" % (i, i) for i in range(64))
    assert dropped(weir) == before + 6


def test_http2_response_trailers_follow_data_that_does_not_end_the_stream(weir, origin):
    h = RawH2(weir.port)
    h.send(h.headers(1, request_headers("/trailers?t=Grpc-Status:%200&t=Grpc-Message:%20fine")))
    frames = [f for f in h.frames(1.0) if f.stream_id == 1]
    h.close()
    dec = hpack.Decoder()
    kinds = [(type(f).__name__, "END_STREAM" in f.flags) for f in frames]
    assert kinds == [("HeadersFrame", False), ("DataFrame", False), ("HeadersFrame", True)], kinds
    assert frames[1].data == b"trailers\n"
    dec.decode(frames[0].data)
    assert dec.decode(frames[2].data) == [("grpc-status", "0"), ("grpc-message", "fine")]


def test_http2_trailers_only_answer_is_one_headers_with_end_stream(weir, origin):
    h = RawH2(weir.port)
    h.send(h.headers(1, request_headers("/trailers?only=1")))
    frames = [f for f in h.frames(1.0) if f.stream_id == 1]
    h.close()
    assert len(frames) == 1 and isinstance(frames[0], hf.HeadersFrame) and "END_STREAM" in frames[0].flags
    hs = dict(hpack.Decoder().decode(frames[0].data))
    assert hs[":status"] == "200" and hs["grpc-status"] == "0" and hs["content-length"] == "0"


def test_http2_request_trailers_with_a_content_length_are_dropped(weir, origin):
    c = H2Client(weir.port)
    sid = c.request("/upload", method="POST", body=b"hello", end=False, headers=[("content-length", "5")])
    c.conn.send_headers(sid, [("x-checksum", "abc")], end_stream=True)
    c.flush()
    r = c.wait([sid])[0]
    assert r["status"] == 200 and json.loads(r["body"])["body_len"] == 5
    assert "trailers" not in origin.requests("/upload")[0]
    c.close()


def test_http2_body_without_a_length_that_ends_before_the_stream_starts_arrives_once(weir, origin):
    # HEADERS, DATA and END_STREAM in one read: the core takes the body
    # in place, whole; it once queued an empty chunked body before it,
    # and the upstream read the body as a second request
    c = H2Client(weir.port)
    r = c.get("/upload", method="POST", body=b"hello")
    assert r["status"] == 200 and json.loads(r["body"])["body_len"] == 5
    assert [e.get("error") for e in origin.entries()] == [None]
    c.close()


def test_http2_request_trailers_past_16_kib_reset_the_stream(weir, origin):
    before = fetch_metrics(weir.stats_port).error("headers_too_large")
    c = H2Client(weir.port)
    sid = c.request("/upload", method="POST", body=b"hello", end=False)
    c.read_some(0.2)
    c.conn.send_headers(sid, [("x-big", "v" * 17000)], end_stream=True)
    c.flush()
    r = c.wait([sid])[0]
    assert r["reset"] == 2 and not r["trailers"]  # INTERNAL_ERROR
    assert c.get("/bytes/3")["body"] == b"xxx"  # the connection goes on
    assert fetch_metrics(weir.stats_port).error("headers_too_large") == before + 1
    assert all("trailers" not in e for e in origin.requests("/upload"))
    c.close()
