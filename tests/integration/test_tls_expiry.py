"""weir_tls_certificate_expiry_seconds: the master's gauge of the seconds
until each listener certificate's notAfter, labelled by listener, file and
subject, from the certificates it loaded (at start and on reload)."""

import calendar
import os
import signal
import subprocess
import time

from harness import slack, wait_until
from pki import make_ca, make_leaf, san
from test_tls import start_tls_weir

NAME = "weir_tls_certificate_expiry_seconds"


def not_after(cert):
    """The certificate's notAfter as Unix time, as openssl reads it."""
    out = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-enddate"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return calendar.timegm(time.strptime(out.split("=", 1)[1], "%b %d %H:%M:%S %Y %Z"))


def series(w):
    m = w.metrics()
    return {(dict(labels)["file"], dict(labels)["subject"], dict(labels)["listener"]): v
            for (name, labels), v in m.samples.items() if name == NAME}


def test_expiry_seconds_is_not_after_minus_now_for_each_certificate(weir_factory, origin, tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    make_ca(d)
    soon = make_leaf(d, "soon", "/CN=soon.test/O=weir tests", [san("soon.test")], days=30)
    late = make_leaf(d, "late", "/CN=late.test", [san("late.test")], days=400)
    w = start_tls_weir(weir_factory, origin, [soon, late])
    now = time.time()
    got = series(w)
    listener = "127.0.0.1:%d" % w.port
    assert set(got) == {(soon[0], "O=weir tests,CN=soon.test", listener), (late[0], "CN=late.test", listener)}, got
    for cert, days in ((soon[0], 30), (late[0], 400)):
        v = next(v for k, v in got.items() if k[0] == cert)
        want = not_after(cert) - now
        assert abs(v - want) <= slack(5), (cert, v, want)
        assert abs(v - days * 86400) <= 86400 + slack(5), (cert, v)
    # it is computed at scrape time: it falls as time passes
    time.sleep(1.1)
    assert next(v for k, v in series(w).items() if k[0] == late[0]) < next(v for k, v in got.items()
                                                                           if k[0] == late[0])


def test_a_reload_replaces_the_certificates_measured(weir_factory, origin, tmp_path):
    d = str(tmp_path / "pki")
    os.mkdir(d)
    make_ca(d)
    old = make_leaf(d, "old", "/CN=old.test", [san("old.test")], days=10)
    new = make_leaf(d, "new", "/CN=new.test", [san("new.test")], days=90)
    w = start_tls_weir(weir_factory, origin, [old])
    assert [k[0] for k in series(w)] == [old[0]]
    text = open(w.conf).read()
    w.write_raw_config(text.replace(old[0], new[0]).replace(old[1], new[1]))
    w.signal(signal.SIGHUP)
    wait_until(lambda: [k[0] for k in series(w)] == [new[0]], slack(10), what="the new certificate's series")
    v = list(series(w).values())[0]
    assert abs(v - (not_after(new[0]) - time.time())) <= slack(5), v


def test_no_tls_listener_no_series(weir):
    assert NAME not in weir.metrics().names()
