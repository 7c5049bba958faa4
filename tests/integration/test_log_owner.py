"""Log files and `user`: the root master opens and creates the logs for
the user the workers run as, so that the workers can reopen them by name
on USR1, and it needs no CAP_DAC_OVERRIDE to do so (weir.service does
not grant it). master/logfiles.c says how."""

import os
import pwd
import shutil
import signal
import tempfile

import pytest

import harness
from harness import simple, slack, wait_until

USER = "nobody"
# weir.service's CapabilityBoundingSet, without CAP_DAC_OVERRIDE
CAPS = "-all,+net_bind_service,+setuid,+setgid,+kill"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the master must be able to switch users")


@pytest.fixture
def logdir():
    """A directory the user can reach (tmp_path's parents are root's 0700)."""
    d = tempfile.mkdtemp(prefix="weir-logs.", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start_as_user(weir_factory, origin, logdir, monkeypatch=None, wrapper=None):
    w = simple(weir_factory, origin, start=False, extra='user = "%s";' % USER)
    text = open(w.conf).read()
    text = text.replace('error = "%s/error.log"' % w.dir, 'error = "%s/error.log"' % logdir)
    text = text.replace('access = "%s/access.log"' % w.dir, 'access = "%s/access.log"' % logdir)
    w.write_raw_config(text)
    w.error_log = os.path.join(logdir, "error.log")
    w.access_log = os.path.join(logdir, "access.log")
    if wrapper:
        monkeypatch.setattr(harness, "WEIR_BIN", wrapper)
    w.start()
    return w


def cap_eff(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("CapEff:")).split()[1], 16)


def owner(path):
    return pwd.getpwuid(os.stat(path).st_uid).pw_name


def rotate_and_check(w, logdir, create_as=None):
    """Moves the logs away as logrotate does (creating new ones as
    <create_as>, like its `create`), sends USR1, and checks that a request
    after it is in the new access log: the workers reopened it."""
    assert w.get("/before").status == 200
    wait_until(lambda: "/before" in w.read(w.access_log), slack(5), what="the first access line")
    for name in ("error.log", "access.log"):
        os.rename(os.path.join(logdir, name), os.path.join(logdir, name + ".1"))
        if create_as is not None:
            p = os.path.join(logdir, name)
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o640))
            os.chown(p, create_as.pw_uid, create_as.pw_gid)
    w.signal(signal.SIGUSR1)
    wait_until(lambda: "reopened" in w.read(w.error_log), slack(5), what="the master's USR1 line in the new error.log")
    # each worker reopens on its own USR1: ask until every one has served
    # a request that lands in the new file (keep-alive off: new connections)
    for i in range(8):
        assert w.get("/after-%d" % i, headers=[("Connection", "close")]).status == 200
    wait_until(lambda: w.read(w.access_log).count("/after-") == 8, slack(5),
               what="every request after USR1 in the new access.log")
    assert "/after-" not in w.read(w.access_log + ".1")
    assert owner(w.access_log) == USER and owner(w.error_log) == USER


def test_logs_in_a_root_directory_are_created_and_given_to_the_user(weir_factory, origin, logdir):
    # the user cannot create files here: the master creates them and
    # hands them over (fchown), as nginx does
    w = start_as_user(weir_factory, origin, logdir)
    for name in ("error.log", "access.log"):
        p = os.path.join(logdir, name)
        assert owner(p) == USER, (name, os.stat(p))
    rotate_and_check(w, logdir)


def test_without_cap_dac_override_the_master_opens_the_users_logs(weir_factory, origin, logdir, monkeypatch, tmp_path):
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    pw = pwd.getpwnam(USER)
    # as the package sets it up: the directory and the files are the user's
    os.chown(logdir, pw.pw_uid, pw.pw_gid)
    for name in ("error.log", "access.log"):
        p = os.path.join(logdir, name)
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o640))
        os.chown(p, pw.pw_uid, pw.pw_gid)
    wrapper = tmp_path / "weir-caps"
    wrapper.write_text('#!/bin/sh\nexec setpriv --bounding-set=%s --inh-caps=-all -- %s "$@"\n'
                       % (CAPS, harness.WEIR_BIN))
    wrapper.chmod(0o755)
    w = start_as_user(weir_factory, origin, logdir, monkeypatch, str(wrapper))
    caps = cap_eff(w.pid)
    assert caps & (1 << 1) == 0 and caps & (1 << 7), "CapEff %x: want CAP_SETUID, not CAP_DAC_OVERRIDE" % caps
    rotate_and_check(w, logdir, create_as=pw)
    # and a reload opens them again the same way
    w.signal(signal.SIGHUP)
    wait_until(lambda: "reloaded" in w.read(w.error_log), slack(10), what="the reload")
    assert "cannot open" not in w.read(w.error_log)
    assert w.get("/after-reload").status == 200
