"""An outside opinion of weir's TLS settings: testssl.sh (Debian's
testssl.sh package, installed by tests/install-deps) run against a TLS
listener on loopback must report no HIGH or CRITICAL finding.

The scan is bounded to what says something about weir rather than about
the test certificates: protocols, cipher categories, forward secrecy,
server defaults (with the test CA added, so the chain is trusted, and
leaves made as a public CA would make them) and the known
vulnerabilities. It takes about a minute alone, up to three beside the
sanitizer suite on a busy machine; the whole run is cut at five. Skipped
when testssl is not installed."""

import json
import os
import shutil
import subprocess

import pytest

from harness import slack
from pki import make_ca, make_leaf, san
from test_tls import make_ocsp, start_tls_weir

TESTSSL = shutil.which("testssl.sh") or shutil.which("testssl")  # Debian installs it as "testssl"

# What testssl judges (protocols, ciphers, defaults offered) is the same in
# both builds, and the handshakes it makes are the other TLS tests' and the
# ClientHello fuzz target's under the sanitizers: the scan's minute is spent
# on the normal build only.
pytestmark = [pytest.mark.skipif(TESTSSL is None, reason="testssl.sh is not installed (tests/install-deps)"),
              pytest.mark.normal_only]


def scan_leaf(d, name, rsa=False):
    """A leaf as a public CA would issue it, so that testssl's certificate
    checks judge weir and not a test shortcut: a year of validity (less
    than 30 days left is HIGH) and an OCSP URI (none is HIGH). Nothing
    listens at the URI: testssl does not fetch it without --phone-out."""
    return make_leaf(d, name, "/CN=%s" % name,
                     [san(name), "authorityInfoAccess=OCSP;URI:http://127.0.0.1:9/",
                      "keyUsage=critical,digitalSignature%s" % (",keyEncipherment" if rsa else ""),
                      "extendedKeyUsage=serverAuth"],
                     rsa=rsa, days=365)


@pytest.fixture
def scan_certs(tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    c = {"dir": d, "ca": make_ca(d, cn="weir scan CA", days=730), "ec": scan_leaf(d, "app.test"),
         "rsa": scan_leaf(d, "rsa.test", rsa=True)}
    c["ocsp"] = make_ocsp(c, c["ec"][0], os.path.join(d, "app.ocsp"))
    return c


def test_testssl_finds_nothing_high_or_critical(weir_factory, origin, scan_certs, tmp_path):
    # ECDSA and RSA both, so the RSA key exchange checks (ROBOT,
    # Bleichenbacher) have something to look at
    # the ECDSA one with a stapled OCSP response, as production would
    ec = scan_certs["ec"] + ('ocsp = "%s";' % scan_certs["ocsp"],)
    w = start_tls_weir(weir_factory, origin, [ec, scan_certs["rsa"]])
    report = str(tmp_path / "testssl.json")
    cmd = [TESTSSL, "--quiet", "--color", "0", "--warnings", "off", "--jsonfile", report,
           "--connect-timeout", "5", "--openssl-timeout", "5", "--add-ca", scan_certs["ca"],
           "--ip", "127.0.0.1", "-p", "-s", "-f", "-S", "-U", "app.test:%d" % w.port]
    r = subprocess.run(cmd, capture_output=True, timeout=slack(300), stdin=subprocess.DEVNULL,
                       cwd=str(tmp_path))
    out = r.stdout.decode(errors="replace")
    assert os.path.exists(report), "no report; exit %d\n%s\n%s" % (r.returncode, out[-3000:],
                                                                    r.stderr.decode(errors="replace")[-2000:])
    with open(report) as f:
        findings = json.load(f)
    assert findings, out[-3000:]
    bad = [f for f in findings if f.get("severity") in ("HIGH", "CRITICAL")]
    assert not bad, "\n".join("%s %s: %s" % (f["severity"], f["id"], f["finding"]) for f in bad)
    # the scan did reach weir: it saw TLS 1.3 offered and TLS 1.0 not
    by_id = {f["id"]: f["finding"] for f in findings}
    assert "offered" in by_id.get("TLS1_3", "") and "not offered" in by_id.get("TLS1", ""), by_id
