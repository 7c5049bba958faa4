#!/usr/bin/python3
"""Writes the seed corpora of the HTTP and config targets into
tests/fuzz/corpus/<target>/ (the ClientHellos in corpus/tls_pick/ are
recordings, made with tests/fuzz/grab-hello). Run from the top of the tree
after changing a list below; the files are committed, so a run of the
fuzzers never needs this script. Names are a short label and a hash, so
rerunning leaves existing seeds alone."""

import glob
import hashlib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))

from test_smuggling import CASES, SMUGGLED  # noqa: E402
from harness import render_config  # noqa: E402


def head(*lines, body=b""):
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


REQUESTS = {
    "get": head(b"GET / HTTP/1.1", b"Host: example.com"),
    "get_query": head(b"GET /a/b%20c?x=1&y=%2F HTTP/1.1", b"Host: example.com:8080",
                      b"User-Agent: curl/7.88.1", b"Accept: */*"),
    "http10": head(b"GET /old HTTP/1.0"),
    "http10_keepalive": head(b"GET / HTTP/1.0", b"Host: a", b"Connection: keep-alive"),
    "absolute_form": head(b"GET http://example.com:80/p?q HTTP/1.1", b"Host: other"),
    "absolute_https_noslash": head(b"GET HTTPS://[::1]:443 HTTP/1.1", b"Host: x"),
    "options_star": head(b"OPTIONS * HTTP/1.1", b"Host: x"),
    "post_length": head(b"POST /upload HTTP/1.1", b"Host: x", b"Content-Length: 5", body=b"hello"),
    "post_chunked": head(b"POST /upload HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked",
                         body=b"5;name=\"v\\\"al\"\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"),
    "expect": head(b"PUT /x HTTP/1.1", b"Host: x", b"Expect: 100-continue", b"Content-Length: 0"),
    "connection_list": head(b"GET / HTTP/1.1", b"Host: x", b"Connection: , keep-alive , X-Hop,close",
                            b"X-Hop: 1", b"Keep-Alive: timeout=5", b"TE: trailers", b"Upgrade: h2c",
                            b"Proxy-Connection: x"),
    "forwarded": head(b"GET / HTTP/1.1", b"Host: x", b"X-Forwarded-For: 10.0.0.1",
                      b"X-Forwarded-Proto: https", b"Via: 1.1 a"),
    "empty_value_obs_text": head(b"DELETE /r HTTP/1.1", b"Host: x", b"X-Empty:", b"X-Tab:\t a\tb \t",
                                 b"X-Obs: caf\xc3\xa9"),
    "leading_crlf": b"\r\n\r\n" + head(b"GET / HTTP/1.1", b"Host: x"),
    "pipelined": head(b"POST /a HTTP/1.1", b"Host: x", b"Content-Length: 3", body=b"abc")
    + head(b"GET /b HTTP/1.1", b"Host: x", b"Transfer-Encoding: chunked", body=b"0\r\n\r\n")
    + head(b"HEAD /c HTTP/1.1", b"Host: x", b"Connection: close"),
    "methods": b"".join(head(m + b" /m HTTP/1.1", b"Host: x") for m in
                        [b"PATCH", b"PROPFIND", b"M-SEARCH", b"PURGE", b"MKCALENDAR", b"UNLINK", b"TRACE"]),
    "connect": head(b"CONNECT example.com:443 HTTP/1.1", b"Host: example.com:443"),
    "host_ipv6": head(b"GET / HTTP/1.1", b"Host: [2001:db8::1]:8080"),
    "host_pct": head(b"GET / HTTP/1.1", b"Host: ex%41mple.com"),
    "fragment": head(b"GET /a#frag HTTP/1.1", b"Host: x"),
    "userinfo": head(b"GET http://u@h/ HTTP/1.1", b"Host: h"),
    "http2_preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "many_headers": head(b"GET / HTTP/1.1", b"Host: x", *[b"X-H%d: %d" % (i, i) for i in range(30)]),
}
for name, raw, _ in CASES:
    REQUESTS["smuggling_" + name] = raw + SMUGGLED

RESPONSES = {
    "ok_length": head(b"HTTP/1.1 200 OK", b"Content-Length: 5", body=b"hello"),
    "chunked_trailers": head(b"HTTP/1.1 200 OK", b"Transfer-Encoding: chunked",
                             body=b"a;x=y\r\n0123456789\r\n0\r\nETag: \"1\"\r\n\r\n"),
    "no_reason": head(b"HTTP/1.1 204"),
    "not_modified_length": head(b"HTTP/1.1 304 Not Modified", b"Content-Length: 10", b"ETag: x"),
    "continue_then_ok": head(b"HTTP/1.1 100 Continue") + head(b"HTTP/1.1 103 Early Hints",
                                                              b"Link: </s.css>; rel=preload")
    + head(b"HTTP/1.1 201 Created", b"Content-Length: 0"),
    "close_delimited": head(b"HTTP/1.0 200 OK", b"Server: x", body=b"until close"),
    "http10_keepalive": head(b"HTTP/1.0 200 OK", b"Connection: keep-alive", b"Content-Length: 2",
                             body=b"hi") + head(b"HTTP/1.1 404 Not Found", b"Content-Length: 0"),
    "switching": head(b"HTTP/1.1 101 Switching Protocols", b"Upgrade: websocket", b"Connection: Upgrade"),
    "te_and_length": head(b"HTTP/1.1 200 OK", b"Transfer-Encoding: chunked", b"Content-Length: 3",
                          body=b"0\r\n\r\n"),
    "te_gzip": head(b"HTTP/1.1 200 OK", b"Transfer-Encoding: gzip", body=b"xx"),
    "two_lengths": head(b"HTTP/1.1 200 OK", b"Content-Length: 1", b"Content-Length: 2", body=b"ab"),
    "obs_fold": head(b"HTTP/1.1 200 OK", b"X: a", b" b", b"Content-Length: 0"),
    "bad_status": head(b"HTTP/1.1 2000 OK", b"Content-Length: 0"),
    "reason_obs_text": head(b"HTTP/1.1 500 Erreur \xe9\tinterne", b"Connection: close", b"Content-Length: 0"),
    "many_headers": head(b"HTTP/1.1 200 OK", *[b"Set-Cookie: c%d=%d" % (i, i) for i in range(30)]),
}

CHUNKED = {
    "simple": b"5\r\nhello\r\n0\r\n\r\n",
    "hex_upper_lower": b"A\r\n0123456789\r\nf\r\n0123456789abcde\r\n0\r\n\r\n",
    "extensions": b"3 ; a = b ;c;d=\"q\\\"x\"\r\nabc\r\n0;last\r\n\r\n",
    "trailers": b"1\r\nx\r\n0\r\nA: 1\r\nB-2:  two  \r\n\r\n",
    "leading_zeros": b"0005\r\nhello\r\n00\r\n\r\n",
    "bare_lf": b"5\nhello\n0\n\n",
    "size_overflow": b"10000000000000005\r\nhello\r\n0\r\n\r\n",
    "data_too_long": b"3\r\nhello\r\n0\r\n\r\n",
    "negative": b"-5\r\nhello\r\n0\r\n\r\n",
    "hex_prefix": b"0x5\r\nhello\r\n0\r\n\r\n",
    "trailer_fold": b"0\r\nA: 1\r\n 2\r\n\r\n",
    "then_next_request": b"0\r\n\r\n" + SMUGGLED,
}


def config_seeds():
    out = {}
    for p in [os.path.join(TOP, "etc", "weir.conf")] + sorted(glob.glob(os.path.join(TOP, "tests", "bench", "*.conf"))):
        out["file_" + os.path.basename(p)] = open(p, "rb").read()
    ups = [{"name": "a", "servers": ["127.0.0.1:9", ("[::1]:8080", 3)], "keepalive": 8},
           {"name": "b", "servers": ["10.0.0.2:80"]}]
    routes = [{"host": "api.example.com", "path": "/v1/", "upstream": "a"},
              {"host": "*.example.com", "path": "/", "upstream": "b"}, {"path": "/", "upstream": "a"}]
    out["harness"] = render_config("/tmp/w", 8080, 9901, ups, routes, workers="auto",
                                   limits={"header_size": "16k", "headers": 100, "body_size": "1m"}).encode()
    out["harness_tls"] = render_config(
        "/tmp/w", 8443, 9902, ups, routes, workers=1, level="debug",
        extra='master_process = true;\ntls_ticket_rotate = "1h";\npid_file = "/tmp/w/pid";').encode().replace(
        b'address = "127.0.0.1:8443"; }',
        b'address = "127.0.0.1:8443"; backlog = 128; tls = { certificates = ( { cert = "c.pem"; '
        b'key = "k.pem"; ocsp = "o.der"; } ); client_ca = "ca.pem"; client_verify = "optional"; '
        b'client_header = "X-Client"; early_data = true; }; }')
    # the libconfig examples in docs/config.md
    doc = open(os.path.join(TOP, "docs", "config.md")).read()
    for i, block in enumerate(re.findall(r"```\n(.*?)```", doc, re.S)):
        if "=" in block and ";" in block:
            out["doc_%d" % i] = block.encode()
    # routes' matching and rewrites (common/config_match.c)
    out["match"] = render_config("/tmp/w", 8080, 9901, ups, [
        {"path": None, "upstream": "a", "extra": 'path_exact = "/x"; '},
        {"path": "/api/", "upstream": "a",
         "extra": 'path_regex = "^/api/v[0-9]+/"; methods = [ "GET", "HEAD" ]; '
                  'match_headers = ( { name = "X-V"; exact = "2"; }, { name = "X-D"; present = false; }, '
                  '{ name = "X-P"; prefix = "a"; }, { name = "X-R"; regex = "^(a|b)+$"; } ); '
                  'match_query = ( { name = "v"; regex = "^[0-9]$"; } ); strip_prefix = "/api"; '
                  'rewrite = { regex = "^/(?<a>[^/]*)/(.*)"; replace = "/n/${a}/$2$$"; }; '},
        {"path": "/", "upstream": "a"}]).encode()
    out["broken_syntax"] = b'workers = 2;\nlisteners = ( { address = "127.0.0.1:80" } ;\n'
    out["include"] = b'@include "missing.conf"\nworkers = 1;\n'
    out["types"] = b'workers = "2";\nlimits = { header_size = -1; body_size = 1e99; };\ntimeouts = 5;\n'
    return out


def records(*pieces):
    return b"".join(bytes([min(len(x), 255)]) + x[:255] for x in pieces)


def field_seeds():
    """fuzz_fields' input: a kind byte (0 request, 1 request with an open
    body, 2 response), the start (method and target, or two status bytes),
    then name and value records, from the text seeds' heads."""
    out = {}
    for name, raw in REQUESTS.items():
        lines = raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
        start = lines[0].split(b" ")
        if len(start) != 3:
            continue
        fields = [l.split(b":", 1) for l in lines[1:] if b":" in l]
        rec = records(start[0], start[1], *[x.strip() for f in fields for x in f])
        out["req_" + name] = b"\x00" + rec
        out["req_open_" + name] = b"\x01" + rec
    for name, raw in RESPONSES.items():
        lines = raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
        try:
            status = int(lines[0].split(b" ")[1]) - 100
        except (IndexError, ValueError):
            continue
        fields = [l.split(b":", 1) for l in lines[1:] if b":" in l]
        out["resp_" + name] = b"\x02" + bytes([status >> 8, status & 255]) + records(
            *[x.strip() for f in fields for x in f])
    return out


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        h = hashlib.sha1(data).hexdigest()[:8]
        with open(os.path.join(d, "%s-%s" % (name, h)), "wb") as f:
            f.write(data)
    print("%s: %d seeds" % (target, len(seeds)))


write("request", REQUESTS)
write("response", RESPONSES)
write("chunked", CHUNKED)
write("fields", field_seeds())
write("config", config_seeds())
