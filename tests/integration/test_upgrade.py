"""Binary upgrade (USR2) loses nothing: the new master takes over the
listening sockets, the stats socket and the shared segment under load; the
pid file follows nginx's .oldbin dance; and a new binary that cannot start
leaves the old master serving as if nothing happened."""

import os
import re
import shutil
import signal
import stat
import threading
import time

import pytest

import harness
from harness import children_of, pid_alive, proc_stat, render_config, slack, wait_until
from test_reload import MetricsSampler, Wrk, fast_origin, no_access_log  # noqa: F401 - fixture

WRK_OK = shutil.which("wrk") and shutil.which("nginx")
pytestmark = pytest.mark.skipif(not WRK_OK, reason="needs nginx and wrk")


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return None


def ppid_of(pid):
    fields = proc_stat(pid)
    return int(fields[1]) if fields else None


class PidFileWatcher:
    """Polls for <pid_file>.oldbin every 2 ms (bounded) and remembers whether
    it was seen and what it held."""

    def __init__(self, pid_file, seconds):
        self.oldbin = pid_file + ".oldbin"
        self.seen = []
        self.stop_ev = threading.Event()
        self.seconds = seconds
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        deadline = time.monotonic() + self.seconds
        while not self.stop_ev.is_set() and time.monotonic() < deadline:
            p = read_pid(self.oldbin)
            if p:
                self.seen.append(p)
            time.sleep(0.002)

    def stop(self):
        self.stop_ev.set()
        self.thread.join(5)


@pytest.fixture
def masters():
    """Pids of masters started by an upgrade: stopped at the end (the
    harness only knows the first master)."""
    pids = []
    yield pids
    for p in pids:
        if pid_alive(p):
            try:
                os.kill(p, signal.SIGTERM)
            except ProcessLookupError:
                continue
    deadline = time.monotonic() + 5
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in pids:
        if pid_alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def private_binary(tmp_path, monkeypatch):
    """weir started from a private copy of the binary under test, so that
    USR2 executes exactly that build even if build/weir is rebuilt while the
    test runs (a build with another shared-segment layout would, rightly,
    start a new segment and restart the counters). Returns (the copy weir
    runs from, a second pristine copy)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = str(bindir / "weir")
    pristine = str(tmp_path / "weir.pristine")
    shutil.copy2(harness.WEIR_BIN, pristine)
    shutil.copy2(pristine, exe)
    monkeypatch.setattr(harness, "WEIR_BIN", exe)
    return exe, pristine


def start_weir(weir_factory, origin, workers=2, extra_timeouts=None):
    w = weir_factory(start=False, upstreams=[{"name": "x", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "x"}])
    w.pid_file = os.path.join(w.dir, "weir.pid")
    t = {"client_keepalive": "60s", "drain": "10s"}
    t.update(extra_timeouts or {})
    w.config_text = no_access_log(render_config(w.dir, w.port, w.stats_port,
                                  [{"name": "x", "servers": [origin.addr], "keepalive": 128}],
                                  [{"path": "/", "upstream": "x"}], workers=workers, timeouts=t,
                                  extra='pid_file = "%s";' % w.pid_file))
    w.write_raw_config(w.config_text)
    w.workers = workers
    w.start()
    w.wait_workers(workers)
    wait_until(lambda: read_pid(w.pid_file) == w.pid, slack(3), what="pid file")
    return w


def test_usr2_under_load_hands_everything_to_a_new_master_and_loses_nothing(
        weir_factory, fast_origin, masters, private_binary):  # noqa: F811
    w = start_weir(weir_factory, fast_origin)
    old_pid = w.pid
    old_workers = w.wait_workers(2)
    sampler = MetricsSampler(w.stats_port).start()
    wrk = Wrk(w.port, 6)
    watcher = None
    try:
        time.sleep(1.5)
        m0 = w.metrics()
        assert m0("weir_requests_total") > 1000
        watcher = PidFileWatcher(w.pid_file, slack(10))
        w.signal(signal.SIGUSR2)
        # the new master writes the pid file; until the old one exits it is
        # the old master's child
        new_pid = wait_until(lambda: (lambda p: p if p and p != old_pid else None)(
            read_pid(w.pid_file)), slack(10), interval=0.005, what="new pid file")
        masters.append(new_pid)
        parent_while_old_lived = ppid_of(new_pid) if w.proc.poll() is None else None
        rc = w.wait_exit(10)
        assert rc == 0, "old master still running or failed: %r" % rc
        res = wrk.result()
    finally:
        wrk.kill()
        if watcher:
            watcher.stop()
        time.sleep(0.3)
        sampler.stop()
    # the old master and its workers are gone
    assert not pid_alive(old_pid)
    assert not any(pid_alive(p) for p in old_workers)
    # the pid file names the new master, which serves; .oldbin is gone
    assert pid_alive(new_pid)
    assert read_pid(w.pid_file) == new_pid
    assert not os.path.exists(w.pid_file + ".oldbin")
    assert watcher.seen and set(watcher.seen) == {old_pid}, watcher.seen[:5]
    if parent_while_old_lived is not None:
        assert parent_while_old_lived == old_pid
    new_workers = wait_until(lambda: (lambda p: p if len(p) == 2 else None)(children_of(new_pid)),
                             slack(5), what="the new master's 2 workers")
    assert not set(new_workers) & set(old_workers)
    # not one request lost under load
    assert res.rc == 0, res
    assert res.requests > 1000, res
    assert not res.has_socket_errors_line, res
    assert not res.has_non2xx_line, res
    # counters carried over: the same segment, never reset, never backwards
    m1 = w.metrics()
    assert m1("weir_requests_total") >= m0("weir_requests_total") + 1000
    assert m1("weir_requests_total") >= res.requests
    assert m1("weir_config_generation") == m0("weir_config_generation") + 1
    assert m1("weir_workers_alive") == 2
    assert m1("weir_start_time_seconds") > 0
    assert sampler.decreases == [], sampler.decreases[:10]
    assert sampler.scrape_errors == [], sampler.scrape_errors[:3]
    assert sampler.samples >= 30
    for _ in range(10):
        assert w.get("/").body == b"hello\n"
    # the new master is a full master: HUP works on it
    r0 = m1("weir_reloads_total", result="ok")
    os.kill(new_pid, signal.SIGHUP)
    wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") == r0 + 1, slack(5),
               what="reload on the new master")
    log = "\n".join(w.error_lines())
    assert "USR2 received" in log
    assert "new master (pid %d) is serving" % new_pid in log, log[-3000:]


BROKEN_SCRIPT = "#!/bin/sh\necho 'weir: this build is broken' >&2\nexit 1\n"


@pytest.mark.parametrize("how", ["binary-exits-1", "config-invalid"])
def test_usr2_with_a_new_binary_that_cannot_start_keeps_the_old_master_serving(
        weir_factory, fast_origin, masters, private_binary, how):  # noqa: F811
    exe, pristine = private_binary
    w = start_weir(weir_factory, fast_origin)
    old_pid = w.pid
    workers = w.wait_workers(2)
    m0 = w.metrics()
    n0 = len(w.error_lines())

    if how == "binary-exits-1":
        # a package replaced the binary with one that cannot run
        with open(exe + ".new", "w") as f:
            f.write(BROKEN_SCRIPT)
        os.chmod(exe + ".new", stat.S_IRWXU)
        os.rename(exe + ".new", exe)
    else:
        # the binary is fine but the configuration it would read is not
        with open(w.conf + ".new", "w") as f:
            f.write(w.config_text + "this is not libconfig\n")
        os.rename(w.conf + ".new", w.conf)

    wrk = Wrk(w.port, 3)
    try:
        time.sleep(0.5)
        w.signal(signal.SIGUSR2)
        wait_until(lambda: any("binary upgrade failed" in l for l in w.error_lines()[n0:]),
                   slack(10), what="the upgrade failure logged")
        res = wrk.result()
    finally:
        wrk.kill()
    # the old master keeps serving, with the same workers, without a blip
    assert w.proc.poll() is None
    assert w.worker_pids() == workers
    assert res.rc == 0 and res.requests > 500, res
    assert not res.has_socket_errors_line, res
    assert not res.has_non2xx_line, res
    for _ in range(10):
        assert w.get("/").body == b"hello\n"
    # the pid file is restored, .oldbin is gone
    assert read_pid(w.pid_file) == old_pid
    assert not os.path.exists(w.pid_file + ".oldbin")
    # the log says why
    new_lines = w.error_lines()[n0:]
    failed = [l for l in new_lines if "binary upgrade failed" in l]
    assert failed and "keeps serving" in failed[0], new_lines
    assert re.search(r"exited|closed the channel|did not say", failed[0]), failed
    stderr = w.read(w.stderr_path)
    if how == "binary-exits-1":
        assert "this build is broken" in stderr, stderr[-2000:]
    else:
        assert "%s:" % w.conf in stderr and "invalid" in stderr, stderr[-2000:]
    m1 = w.metrics()
    assert m1("weir_config_generation") == m0("weir_config_generation")
    assert m1("weir_requests_total") >= m0("weir_requests_total") + res.requests

    # once the cause is fixed, the same master upgrades fine
    if how == "binary-exits-1":
        shutil.copy2(pristine, exe + ".new")
        os.rename(exe + ".new", exe)
    else:
        with open(w.conf + ".new", "w") as f:
            f.write(w.config_text)
        os.rename(w.conf + ".new", w.conf)
    w.signal(signal.SIGUSR2)
    new_pid = wait_until(lambda: (lambda p: p if p and p != old_pid else None)(read_pid(w.pid_file)),
                         slack(10), what="new pid file")
    masters.append(new_pid)
    assert w.wait_exit(10) == 0
    assert pid_alive(new_pid)
    assert w.get("/").body == b"hello\n"
    assert not os.path.exists(w.pid_file + ".oldbin")
    assert w.metrics()("weir_requests_total") >= m1("weir_requests_total")


def test_usr2_lets_requests_in_flight_on_the_old_master_finish(weir_factory, origin, masters,
                                                               private_binary):
    w = start_weir(weir_factory, origin, extra_timeouts={"upstream_read": "10s"})
    old_pid = w.pid
    slow = []
    t_sent = time.monotonic()
    for _ in range(4):
        c = harness.Client(w.port, timeout=10)
        c.send(harness.build_request("GET", "/slow/2000"))
        slow.append(c)
    idle = harness.Client(w.port, timeout=5)
    assert idle.request("GET", "/bytes/3").status == 200
    time.sleep(slack(0.3))
    w.signal(signal.SIGUSR2)
    new_pid = wait_until(lambda: (lambda p: p if p and p != old_pid else None)(read_pid(w.pid_file)),
                         slack(10), interval=0.005, what="new pid file")
    masters.append(new_pid)
    # the new master serves at once; the old one waits for its requests
    assert w.get("/bytes/5").body == b"xxxxx"
    assert w.proc.poll() is None, "the old master left before its requests were answered"
    # the idle keep-alive connection, used within the grace, is answered
    # by the old worker and then closed; the new pid file appears before the
    # old master has heard "ready", so wait until its workers drain
    wait_until(lambda: any("draining" in l and "connection(s)" in l for l in w.error_lines()), slack(10),
               interval=0.005, what="the old workers to start draining")
    r = idle.request("GET", "/bytes/4")
    assert r.status == 200 and r.body == b"xxxx", r
    assert "close" in r.connection_tokens(), r
    assert idle.closed_by_peer(2)
    idle.close()
    for c in slow:
        r = c.read_response(timeout=8)
        assert r.status == 200 and r.body == b"slow\n", r
        c.close()
    assert w.wait_exit(5) == 0
    # it waited for them: two seconds upstream, counted from the send
    assert time.monotonic() - t_sent >= 2.0
    assert pid_alive(new_pid)
    assert len(origin.requests("/slow/2000")) == 4
    assert read_pid(w.pid_file) == new_pid
    assert not os.path.exists(w.pid_file + ".oldbin")
