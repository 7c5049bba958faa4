"""Trailers end to end (worker/h1/trailers.h, worker/h2/h2_trailers.h), and
the HTTP/2 request bodies they ride on."""

import json

from h2util import H2Client


def test_http2_body_without_a_length_that_ends_before_the_stream_starts_arrives_once(weir, origin):
    # HEADERS, DATA and END_STREAM in one read: the core takes the body
    # in place, whole; it once queued an empty chunked body before it,
    # and the upstream read the body as a second request
    c = H2Client(weir.port)
    r = c.get("/upload", method="POST", body=b"hello")
    assert r["status"] == 200 and json.loads(r["body"])["body_len"] == 5
    assert [e.get("error") for e in origin.entries()] == [None]
    c.close()
