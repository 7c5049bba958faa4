"""Request smuggling: every ambiguous or malformed framing gets 400 with
Connection: close, the connection is closed, and nothing of it reaches the
origin (checked in the origin's log)."""

import pytest

from harness import error_response_ok, settle, slack, wait_until

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"


def req(head_lines, body=b""):
    return b"\r\n".join(head_lines) + b"\r\n\r\n" + body


# (id, raw request, whether the head alone is already invalid)
# Head-level cases must never reach the origin at all; body-level cases
# (found only while streaming the body) must never reach it as a complete
# request.
CASES = [
    ("content_length_and_transfer_encoding",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: 4",
          b"Transfer-Encoding: chunked"], b"0\r\n\r\n" + SMUGGLED), True),
    ("transfer_encoding_and_content_length",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked",
          b"Content-Length: 40"], b"0\r\n\r\n" + SMUGGLED), True),
    ("lower_case_content_length_and_transfer_encoding",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"content-length: 4",
          b"TRANSFER-ENCODING: chunked"], b"0\r\n\r\n" + SMUGGLED), True),
    ("duplicate_content_length_different",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: 0",
          b"Content-Length: 38"], SMUGGLED), True),
    ("duplicate_content_length_same",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: 5",
          b"Content-Length: 5"], b"hello"), True),
    ("content_length_list",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: 5, 5"], b"hello"), True),
    ("content_length_not_a_number",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: abc"], b"hello"), True),
    ("content_length_negative",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: -1"], SMUGGLED), True),
    ("content_length_plus_sign",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: +5"], b"hello"), True),
    ("content_length_hex",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: 0x5"], b"hello"), True),
    ("content_length_with_inner_space",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: 1 0"], b"0123456789"), True),
    ("content_length_overflow",
     req([b"POST /upload HTTP/1.1", b"Host: x",
          b"Content-Length: 18446744073709551621"], b"hello"), True),
    ("transfer_encoding_gzip_chunked",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: gzip, chunked"],
         b"0\r\n\r\n"), True),
    ("transfer_encoding_chunked_twice_in_one_header",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked, chunked"],
         b"0\r\n\r\n"), True),
    ("transfer_encoding_two_headers",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked",
          b"Transfer-Encoding: identity"], b"0\r\n\r\n"), True),
    ("transfer_encoding_identity",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: identity"],
         SMUGGLED), True),
    ("transfer_encoding_xchunked",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: xchunked"],
         b"0\r\n\r\n"), True),
    ("transfer_encoding_chunked_then_garbage",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked;q=1"],
         b"0\r\n\r\n"), True),
    ("transfer_encoding_in_http10",
     req([b"POST /upload HTTP/1.0", b"Host: x", b"Transfer-Encoding: chunked"],
         b"0\r\n\r\n" + SMUGGLED), True),
    ("transfer_encoding_with_space_before_colon",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding : chunked",
          b"Content-Length: 5"], b"0\r\n\r\n"), True),
    ("host_with_space_before_colon",
     req([b"GET / HTTP/1.1", b"Host : x"]), True),
    ("tab_before_colon",
     req([b"GET / HTTP/1.1", b"Host: x", b"X-A\t: 1"]), True),
    ("obs_fold",
     req([b"GET / HTTP/1.1", b"Host: x", b"X-A: one", b" two"]), True),
    ("obs_fold_of_transfer_encoding",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding:", b" chunked",
          b"Content-Length: 5"], b"0\r\n\r\n"), True),
    ("cr_inside_a_header_value",
     req([b"GET / HTTP/1.1", b"Host: x", b"X-A: a\rX-B: b"]), True),
    ("lf_inside_a_header_value",
     b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\nTransfer-Encoding: chunked\r\n\r\n", True),
    ("nul_inside_a_header_value",
     req([b"GET / HTTP/1.1", b"Host: x", b"X-A: a\x00b"]), True),
    ("nul_inside_a_header_name",
     req([b"GET / HTTP/1.1", b"Host: x", b"X-\x00A: a"]), True),
    ("space_inside_a_header_name",
     req([b"GET / HTTP/1.1", b"Host: x", b"X A: a"]), True),
    ("bare_lf_line_endings",
     b"GET / HTTP/1.1\nHost: x\n\n", True),
    ("bare_lf_after_the_request_line",
     b"GET / HTTP/1.1\nHost: x\r\n\r\n", True),
    ("bare_cr_line_ending",
     b"GET / HTTP/1.1\r\nHost: x\rX-A: 1\r\n\r\n", True),
    ("missing_host_in_http11",
     req([b"GET / HTTP/1.1", b"X-A: 1"]), True),
    ("two_host_headers",
     req([b"GET / HTTP/1.1", b"Host: a.example", b"Host: b.example"]), True),
    ("request_line_with_two_spaces",
     req([b"GET  / HTTP/1.1", b"Host: x"]), True),
    ("request_line_with_extra_field",
     req([b"GET / HTTP/1.1 extra", b"Host: x"]), True),
    ("bad_chunk_size",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked"],
         b"zz\r\nhello\r\n0\r\n\r\n"), False),
    ("negative_chunk_size",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked"],
         b"-5\r\nhello\r\n0\r\n\r\n"), False),
    ("chunk_size_with_0x_prefix",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked"],
         b"0x5\r\nhello\r\n0\r\n\r\n"), False),
    ("chunk_size_overflow",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked"],
         b"10000000000000005\r\nhello\r\n0\r\n\r\n"), False),
    ("bytes_other_than_crlf_after_chunk_data",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked"],
         b"5\r\nhelloXX\r\n0\r\n\r\n"), False),
    ("chunk_data_longer_than_its_size",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked"],
         b"3\r\nhello\r\n0\r\n\r\n"), False),
    ("bare_lf_after_chunk_size",
     req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked"],
         b"5\nhello\r\n0\r\n\r\n"), False),
]


@pytest.mark.parametrize("raw,head_level", [(c[1], c[2]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_smuggling_shape_gets_400_closes_and_never_reaches_the_origin(weir, origin, raw, head_level):
    m0 = weir.metrics()
    with weir.client() as c:
        c.send(raw + SMUGGLED)
        r = c.read_response(timeout=3)
        error_response_ok(r, 400, "Bad Request", close=True)
        # nothing after the 400: not a response to the smuggled request
        assert c.closed_by_peer(2)
    settle(0.3)
    if head_level:
        assert origin.entries() == [], origin.entries()
    else:
        assert origin.requests() == [], origin.requests()
    assert not any("/smuggled" in e.get("target", "") for e in origin.entries())

    def counted():
        m = weir.metrics()
        return (m.error("bad_request") + m.error("bad_framing")
                - m0.error("bad_request") - m0.error("bad_framing")) >= 1
    wait_until(counted, slack(2), what="bad_request or bad_framing counted")
    # weir is still fine, and the origin log works (so the checks above mean something)
    assert weir.get("/echo").status == 200
    assert [e["target"] for e in origin.requests()] == ["/echo"]


def test_a_smuggling_attempt_on_a_kept_alive_connection_closes_it_after_earlier_good_requests(weir, origin):
    with weir.client() as c:
        assert c.request("GET", "/bytes/3").body == b"xxx"
        c.send(CASES[0][1] + SMUGGLED)
        r = c.read_response(timeout=3)
        assert r.status == 400
        assert c.closed_by_peer(2)
    settle(0.3)
    assert [e["target"] for e in origin.entries()] == ["/bytes/3"]


def test_a_valid_chunked_body_with_a_chunk_extension_is_not_mistaken_for_smuggling(weir, origin):
    body = b"5;name=value\r\nhello\r\n0\r\n\r\n"
    with weir.client() as c:
        c.send(req([b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked"], body))
        r = c.read_response()
        assert r.status == 200 and r.json()["body_len"] == 5


def test_leading_and_trailing_whitespace_around_header_values_is_accepted(weir, origin):
    with weir.client() as c:
        c.send(req([b"POST /upload HTTP/1.1", b"Host:   x  ", b"Content-Length:\t5 "], b"hello"))
        r = c.read_response()
        assert r.status == 200 and r.json()["body_len"] == 5
