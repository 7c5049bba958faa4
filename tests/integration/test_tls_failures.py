"""Failed client handshakes are counted by a bounded set of reasons:
weir_tls_handshake_failures_total{reason=...}."""

import socket
import subprocess

from harness import slack, wait_until
from test_tls import certs, start_tls_weir  # noqa: F401  (certs is a fixture)


def failures(w, reason):
    return w.metrics().get("weir_tls_handshake_failures_total", reason=reason)


def test_plain_http_on_a_tls_port_is_counted_as_plain_http(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1)
    before = failures(w, "plain_http")
    with socket.create_connection(("127.0.0.1", w.port), timeout=slack(5)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
        try:
            s.recv(1024)
        except OSError:
            pass
    wait_until(lambda: failures(w, "plain_http") == before + 1, slack(5), what="a plain_http failure counted")


def test_an_old_protocol_is_counted_as_protocol(weir_factory, origin, certs):
    w = start_tls_weir(weir_factory, origin, [certs["ec"]], workers=1)
    before = failures(w, "protocol")
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % w.port, "-tls1_1",
                        "-cipher", "DEFAULT@SECLEVEL=0"], input=b"", capture_output=True, timeout=slack(15))
    assert r.returncode != 0
    wait_until(lambda: failures(w, "protocol") == before + 1, slack(5), what="a protocol failure counted")
    # every reason is exported, also at zero, so dashboards see the series
    m = w.metrics()
    for reason in ("protocol", "plain_http", "client_certificate", "timeout", "closed", "other"):
        assert m.has("weir_tls_handshake_failures_total", reason=reason)
