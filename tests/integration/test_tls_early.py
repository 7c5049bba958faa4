"""TLS 1.3 early data (0-RTT): off unless a listener says early_data = true;
then a resumed client's safe, bodiless request is served from early data and
reaches the origin with Early-Data: 1 (RFC 8470), while an unsafe one is
answered 425 Too Early; the origin's own 425 is passed on."""

import json
import os
import subprocess

from harness import slack
from test_tls import certs, start_tls_weir  # noqa: F401  (certs is a fixture)


def s_client(port, *args, stdin=b""):
    return subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", "app.test",
                           "-tls1_3", "-ign_eof"] + list(args), input=stdin, capture_output=True,
                          timeout=slack(15))


def zero_rtt(w, tmp_path, request, accept_text="Early data was accepted"):
    """A first connection saves a session; a second one sends <request> as
    early data. Returns (accepted, stdout) of the second."""
    sess = str(tmp_path / "sess.pem")
    early = str(tmp_path / "early.txt")
    first = s_client(w.port, "-sess_out", sess,
                     stdin=b"GET / HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
    assert first.returncode == 0, first.stderr[-500:]
    assert os.path.getsize(sess) > 0
    with open(early, "wb") as f:
        f.write(request)
    second = s_client(w.port, "-sess_in", sess, "-early_data", early)
    out = second.stdout.decode("latin-1")
    return accept_text in out and "Early data was rejected" not in out, out


def test_early_data_is_refused_unless_the_listener_enables_it(weir_factory, origin, certs, tmp_path):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1)
    accepted, out = zero_rtt(w, tmp_path, b"GET /echo HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
    assert not accepted, out[-800:]


def test_a_safe_request_in_early_data_reaches_the_origin_marked(weir_factory, origin, certs, tmp_path):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1, tls_extra="early_data = true;")
    accepted, out = zero_rtt(w, tmp_path, b"GET /echo HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
    assert accepted, out[-800:]
    assert "HTTP/1.1 200" in out
    body, _ = json.JSONDecoder().raw_decode(out[out.index("{", out.index("HTTP/1.1 200")):])
    headers = {k.lower(): v for k, v in body["headers"]}
    assert headers.get("early-data") == "1"


def test_an_unsafe_request_in_early_data_is_answered_425(weir_factory, origin, certs, tmp_path):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1, tls_extra="early_data = true;")
    before = w.metrics().error("too_early")
    accepted, out = zero_rtt(w, tmp_path, b"POST /echo HTTP/1.1\r\nHost: app.test\r\nContent-Length: 2\r\n"
                                           b"Connection: close\r\n\r\nhi")
    assert accepted, out[-800:]
    assert "HTTP/1.1 425 Too Early" in out
    assert w.metrics().error("too_early") == before + 1
    # nothing of it reached the origin
    assert all(r["method"] != "POST" for r in origin.requests())


def test_the_origins_own_425_is_passed_on(weir_factory, origin, certs, tmp_path):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1, tls_extra="early_data = true;")
    accepted, out = zero_rtt(w, tmp_path, b"GET /status/425 HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n")
    assert accepted, out[-800:]
    assert "HTTP/1.1 425" in out
