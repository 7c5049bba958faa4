"""An ECDSA and an RSA certificate for the same names on one TLS listener:
each handshake gets the ECDSA one when the client can verify it (TLS 1.3:
its signature_algorithms; TLS 1.2: an ECDHE-ECDSA suite as well), else the
RSA one, whichever is listed first; a name only one certificate carries
still gets that certificate, and a client without SNI gets the same choice
between the first certificate and its twin.

Clients are real ones (`openssl s_client`, curl); the served certificate is
told by its DER bytes, and every case proxies a request whose status and
body are checked byte for byte."""

import os
import re
import ssl
import subprocess

import pytest

from harness import slack
from pki import make_ca, make_leaf as make_cert, san


def make_leaf(d, stem, cn, sans, rsa):
    """A leaf signed by the CA in <d>; returns (cert, key, DER bytes)."""
    pem, key = make_cert(d, stem, "/CN=%s" % cn, [san(*sans)], rsa=rsa)
    with open(pem) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    return pem, key, der


@pytest.fixture
def pki(tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    ca = make_ca(d, cn="weir dual test CA")
    names = ["dual.test", "*.dual.test"]
    return {
        "dir": d,
        "ca": ca,
        "ec": make_leaf(d, "dual-ec", "dual.test", names, rsa=False),
        "rsa": make_leaf(d, "dual-rsa", "dual.test", names, rsa=True),
        "solo": make_leaf(d, "solo", "solo.test", ["solo.test"], rsa=True),
    }


def start(weir_factory, origin, leaves):
    """weir with one TLS listener serving <leaves> in that order."""
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    text = open(w.conf).read()
    old = 'listeners = ( { address = "127.0.0.1:%d"; } );' % w.port
    assert old in text
    certs = ", ".join('{ cert = "%s"; key = "%s"; }' % (c[0], c[1]) for c in leaves)
    w.write_raw_config(text.replace(old, 'listeners = ( { address = "127.0.0.1:%d"; tls = { certificates = ( %s ); }; } );'
                                    % (w.port, certs)))
    w.start()
    return w


PEM_RE = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.*?-----END CERTIFICATE-----", re.S)
BODY = b"hello from origin\n"


def check_response(out, what):
    """The one HTTP response in <out> (bytes after the TLS chatter)."""
    i = out.find(b"HTTP/1.1 ")
    assert i >= 0, (what, out[-3000:])
    head, sep, rest = out[i:].partition(b"\r\n\r\n")
    assert sep, (what, out[i:])
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 200 OK", (what, head)
    m = re.search(rb"(?im)^content-length:\s*(\d+)\r?$", head)
    assert m and int(m.group(1)) == len(BODY), (what, head)
    assert rest[:len(BODY)] == BODY, (what, rest[:200])


def s_client(w, pki, name, *args):
    """A handshake and one request with `openssl s_client`; returns the
    DER of the certificate served. <name> None: no SNI."""
    sni = ["-servername", name, "-tlsextdebug"] if name else ["-noservername"]
    req = b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (name or "dual.test").encode()
    r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % w.port, "-CAfile", pki["ca"],
                        "-verify_return_error", "-ign_eof"] + sni + list(args),
                       input=req, capture_output=True, timeout=slack(15))
    what = (name, args)
    assert r.returncode == 0, (what, r.stdout[-3000:], r.stderr[-2000:])
    assert b"Verify return code: 0 (ok)" in r.stdout, (what, r.stdout[-3000:])
    pem = PEM_RE.search(r.stdout)
    assert pem, (what, r.stdout[-3000:])
    if name:  # the server says it used the name (RFC 6066), as before
        assert b'TLS server extension "server name"' in r.stdout[:pem.start()], (what, r.stdout[:3000])
    check_response(r.stdout[pem.end():], what)
    return ssl.PEM_cert_to_DER_cert(pem.group(0).decode())


def curl(w, pki, name, *args):
    """The same with curl, as it comes; returns the DER served."""
    body = os.path.join(pki["dir"], "curl.body")
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", pki["ca"], "-o", body,
                        "-w", "%{http_code}\n%{certs}", "--resolve", "%s:%d:127.0.0.1" % (name, w.port)]
                       + list(args) + ["https://%s:%d/" % (name, w.port)],
                       capture_output=True, timeout=slack(15))
    assert r.returncode == 0, r.stderr
    status, _, certs = r.stdout.partition(b"\n")
    assert status == b"200", r.stdout
    with open(body, "rb") as f:
        assert f.read() == BODY
    pem = PEM_RE.search(certs)
    assert pem, r.stdout
    return ssl.PEM_cert_to_DER_cert(pem.group(0).decode())


ORDERS = {"ecdsa_first": ("ec", "rsa", "solo"), "rsa_first": ("rsa", "ec", "solo")}


@pytest.fixture(params=sorted(ORDERS))
def dual(request, weir_factory, origin, pki):
    w = start(weir_factory, origin, [pki[k] for k in ORDERS[request.param]])
    return w, pki


def test_an_ecdsa_capable_client_gets_the_ecdsa_certificate(dual):
    w, pki = dual
    ec = pki["ec"][2]
    for v in ("-tls1_3", "-tls1_2"):
        assert s_client(w, pki, "dual.test", v, "-sigalgs", "ECDSA+SHA256") == ec, v
        # the wildcard both certificates carry, in another case
        assert s_client(w, pki, "A.Dual.Test", v, "-sigalgs", "ECDSA+SHA256") == ec, v
    # and what a client offers by default, TLS 1.3 and 1.2 alike
    assert curl(w, pki, "dual.test") == ec
    assert curl(w, pki, "dual.test", "--tlsv1.2", "--tls-max", "1.2") == ec
    assert s_client(w, pki, "dual.test") == ec


def test_a_client_without_ecdsa_signatures_gets_the_rsa_certificate(dual):
    w, pki = dual
    rsa = pki["rsa"][2]
    for v in ("-tls1_3", "-tls1_2"):
        assert s_client(w, pki, "dual.test", v, "-sigalgs", "RSA-PSS+SHA256:RSA+SHA256") == rsa, v
        assert s_client(w, pki, "x.dual.test", v, "-sigalgs", "RSA-PSS+SHA256:RSA+SHA256") == rsa, v


def test_a_tls12_client_without_ecdsa_suites_gets_the_rsa_certificate(dual):
    w, pki = dual
    rsa = pki["rsa"][2]
    # its signature_algorithms still list ECDSA: the suite decides
    assert s_client(w, pki, "dual.test", "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256") == rsa
    assert curl(w, pki, "dual.test", "--tlsv1.2", "--tls-max", "1.2",
                "--ciphers", "ECDHE-RSA-AES128-GCM-SHA256") == rsa


def test_a_client_without_sni_gets_the_same_choice_between_the_twins(dual):
    w, pki = dual
    for v in ("-tls1_3", "-tls1_2"):
        assert s_client(w, pki, None, v, "-sigalgs", "ECDSA+SHA256") == pki["ec"][2], v
        assert s_client(w, pki, None, v, "-sigalgs", "RSA-PSS+SHA256:RSA+SHA256") == pki["rsa"][2], v
    # a name nobody carries: the same as no SNI (s_client checks the
    # chain, not the name, so the handshake completes)
    assert s_client(w, pki, "other.test", "-sigalgs", "RSA-PSS+SHA256") == pki["rsa"][2]
    assert s_client(w, pki, "other.test", "-sigalgs", "ECDSA+SHA256") == pki["ec"][2]


def test_a_name_only_one_certificate_carries_gets_that_certificate(dual):
    w, pki = dual
    solo = pki["solo"][2]
    assert curl(w, pki, "solo.test") == solo
    for v in ("-tls1_3", "-tls1_2"):
        assert s_client(w, pki, "solo.test", v) == solo, v
        assert s_client(w, pki, "solo.test", v, "-sigalgs", "RSA-PSS+SHA256:RSA+SHA256") == solo, v
    # the twins' wildcard does not cover solo.test's own subdomains
    assert s_client(w, pki, "a.solo.test", "-sigalgs", "ECDSA+SHA256") == pki["ec"][2]


def test_a_session_resumes_under_the_certificate_it_was_made_with(dual, tmp_path):
    """Tickets are bound to the certificate's context: an RSA session
    resumes for an RSA-only client."""
    w, pki = dual
    sess = str(tmp_path / "rsa.sess")
    req = b"GET / HTTP/1.1\r\nHost: dual.test\r\nConnection: close\r\n\r\n"
    base = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % w.port, "-servername", "dual.test",
            "-CAfile", pki["ca"], "-ign_eof", "-sigalgs", "RSA-PSS+SHA256"]
    r = subprocess.run(base + ["-sess_out", sess], input=req, capture_output=True, timeout=slack(15))
    assert r.returncode == 0 and BODY in r.stdout, r.stdout[-2000:]
    r = subprocess.run(base + ["-sess_in", sess], input=req, capture_output=True, timeout=slack(15))
    assert b"Reused, TLS" in r.stdout, r.stdout[-2000:]
    check_response(r.stdout, "resumed")


def test_weir_t_accepts_two_certificates_for_the_same_names(tmp_path, pki):
    from harness import render_config, WEIR_BIN
    text = render_config(str(tmp_path), 18443, 18444, upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         routes=[{"path": "/", "upstream": "a"}])
    old = 'listeners = ( { address = "127.0.0.1:18443"; } );'
    certs = ", ".join('{ cert = "%s"; key = "%s"; }' % (pki[k][0], pki[k][1]) for k in ("rsa", "ec"))
    p = tmp_path / "check.conf"
    p.write_text(text.replace(old, 'listeners = ( { address = "127.0.0.1:18443"; tls = { certificates = ( %s ); }; } );'
                              % certs))
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10),
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
