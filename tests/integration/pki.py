"""Test certificates, made with the openssl command-line tool: CAs and the
certificates they sign, each in a folder of the test's own. Every TLS test
file makes its keys here, so a change of key type or tool flag is made
once."""

import os
import subprocess

from harness import slack

EC_P256 = ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"]


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True,
                   timeout=slack(30), stdin=subprocess.DEVNULL)


def san(*names):
    """The subjectAltName extension line for DNS <names>."""
    return "subjectAltName=%s" % ",".join("DNS:%s" % n for n in names)


def make_ca(d, stem="ca", cn="weir test CA", days=30):
    """A self-signed P-256 CA, <stem>.pem and <stem>.key in <d>; returns the
    certificate's path."""
    openssl("req", "-x509", "-newkey", *EC_P256, "-nodes", "-days", str(days), "-subj", "/CN=%s" % cn,
            "-keyout", "%s.key" % stem, "-out", "%s.pem" % stem, cwd=d)
    return os.path.join(d, "%s.pem" % stem)


def make_leaf(d, stem, subject, ext=(), rsa=False, ca="ca", days=30, utf8=False):
    """A certificate for <subject> ("/CN=app.test"), with the extension
    lines <ext>, a P-256 (or RSA 2048) key, signed by CA <ca> in <d>;
    returns (certificate path, key path)."""
    openssl("req", "-newkey", *(["rsa:2048"] if rsa else EC_P256), "-nodes", *(["-utf8"] if utf8 else []),
            "-subj", subject, "-keyout", "%s.key" % stem, "-out", "%s.csr" % stem, cwd=d)
    args = ["x509", "-req", "-in", "%s.csr" % stem, "-CA", "%s.pem" % ca, "-CAkey", "%s.key" % ca,
            "-CAcreateserial", "-days", str(days)]
    if ext:
        with open(os.path.join(d, "%s.ext" % stem), "w") as f:
            f.write("".join(line + "\n" for line in ext))
        args += ["-extfile", "%s.ext" % stem]
    openssl(*args, "-out", "%s.pem" % stem, cwd=d)
    return os.path.join(d, "%s.pem" % stem), os.path.join(d, "%s.key" % stem)
