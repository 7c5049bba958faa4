"""Active health checks (upstreams.health): one prober per node, a child of
the master, whose results are words in the shared segment that every worker
reads when it picks a server.

Origins of our own answer /healthz with what /health-set/N last asked for
(tests/origin/origin.py), so a test can fail a server's checks while the
server itself still answers; requests are counted on the origin side. Bounds
are generous (the machine is shared): a check every 200 ms, fall 2, rise 2.
"""

import os
import re
import signal
import socket
import subprocess
import time

import pytest

import harness
from harness import Client, closed_port, free_port, settle, slack, wait_until, WEIR_BIN
from test_upgrade import masters, private_binary, read_pid  # noqa: F401 - fixtures
from test_upstream_tls import NGINX, pki, tls_origin  # noqa: F401 - fixtures

INTERVAL = 0.2
FAST = 'path = "/healthz"; interval = "200ms"; timeout = "150ms"; jitter = "20ms"; rise = 2; fall = 2;'


def health_set(origin, what):
    """Tells <origin> (directly, not through weir) what /healthz answers."""
    with Client(origin.port) as c:
        r = c.request("GET", "/health-set/%s" % what, headers=[("Connection", "close")])
    assert r.status == 200, r


def health(w, server, upstream="a"):
    m = w.metrics()
    if not m.has("weir_upstream_health", upstream=upstream, server=server):
        return None
    return m("weir_upstream_health", upstream=upstream, server=server)


def checks(w, server, result, upstream="a"):
    return w.metrics()("weir_health_checks_total", upstream=upstream, server=server, result=result)


def upstreams_line(w, server):
    """The key=value fields of <server>'s line in GET /upstreams."""
    with Client(w.stats_port) as c:
        r = c.request("GET", "/upstreams", host="127.0.0.1:%d" % w.stats_port,
                      headers=[("Connection", "close")])
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        f = line.split()
        if len(f) > 1 and f[0] == "server" and f[1] == server:
            return dict(kv.split("=", 1) for kv in f[2:])
    raise AssertionError("no line for %s in %r" % (server, r.body))


def prober_pid(w):
    """The prober's pid, from its start-up line (the newest one)."""
    pids = [int(m.group(1)) for l in w.error_lines()
            for m in [re.search(r"health prober started, pid (\d+)", l)] if m]
    return pids[-1] if pids else None


def two_origins(weir_factory, origin_factory, health=FAST, workers=3, **kw):
    a, b = origin_factory("A"), origin_factory("B")
    w = weir_factory(upstreams=[{"name": "a", "servers": [a.addr, b.addr], "health": health, **kw}],
                     routes=[{"path": "/", "upstream": "a"}], workers=workers)
    wait_until(lambda: checks(w, a.addr, "ok") >= 1 and checks(w, b.addr, "ok") >= 1, slack(5),
               what="the first checks")
    return w, a, b


def spread(w, n=30):
    """Sends <n> requests, each on a new connection (so every worker gets
    some); all must be answered 200."""
    for _ in range(n):
        r = w.get("/echo", headers=[("Connection", "close")])
        assert r.status == 200, r


def test_a_failing_server_is_taken_out_within_fall_intervals_and_gets_no_request_until_back(
        weir_factory, origin_factory):
    w, a, b = two_origins(weir_factory, origin_factory)
    spread(w, 20)
    assert a.requests("/echo") and b.requests("/echo")  # both in use
    assert health(w, b.addr) == 1

    health_set(b, 503)
    t0 = time.monotonic()
    wait_until(lambda: health(w, b.addr) == 0, slack(2 * INTERVAL * 2 + 1), what="b taken out")
    took_out = time.monotonic() - t0
    n_b = len(b.requests("/echo"))
    spread(w, 30)
    assert len(b.requests("/echo")) == n_b, "a request reached the server while its health was down"
    assert any("health down after 2 failed check(s) in a row (last: HTTP status 503)" in l
               and b.addr in l for l in w.error_lines()), w.error_lines()
    line = upstreams_line(w, b.addr)
    assert line["health"] == "down" and line["last_check"] == "bad_status" and line["last_status"] == "503", line

    health_set(b, 200)
    t1 = time.monotonic()
    wait_until(lambda: health(w, b.addr) == 1, slack(2 * INTERVAL * 2 + 1), what="b back")
    back = time.monotonic() - t1
    spread(w, 20)
    assert len(b.requests("/echo")) > n_b
    w.logged(lambda l: "health up after 2 passed check(s)" in l and b.addr in l)
    assert checks(w, b.addr, "bad_status") >= 2
    assert upstreams_line(w, b.addr)["health"] == "up"
    # one transition each way, one line each
    assert sum(1 for l in w.error_lines() if "health down" in l) == 1
    print("taken out after %.2f s, back after %.2f s" % (took_out, back))


def test_when_every_server_is_down_by_health_the_panic_mode_still_serves(weir_factory, origin_factory):
    w, a, b = two_origins(weir_factory, origin_factory)
    before = w.metrics()("weir_upstream_panic_total")
    health_set(a, 500)
    health_set(b, 500)
    wait_until(lambda: health(w, a.addr) == 0 and health(w, b.addr) == 0, slack(3), what="both down")
    spread(w, 10)  # answered by the servers anyway: a stale guess beats a certain 503
    settle()
    assert w.metrics()("weir_upstream_panic_total") - before >= 10


def test_tcp_checks_take_out_a_closed_port_and_keep_an_open_one(weir_factory, origin):
    dead = "127.0.0.1:%d" % closed_port()
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr, dead], "max_fails": 0,
                                 "health": 'type = "tcp"; interval = "200ms"; timeout = "150ms"; fall = 2;'}],
                     routes=[{"path": "/", "upstream": "a"}], workers=2)
    wait_until(lambda: health(w, dead) == 0, slack(3), what="the closed port taken out")
    assert health(w, origin.addr) == 1
    assert checks(w, dead, "connect_failed") >= 1
    assert upstreams_line(w, dead)["last_check"] == "connect_failed"
    # max_fails is off: only the health word keeps requests off the dead port
    for _ in range(10):
        assert w.get("/", headers=[("Connection", "close")]).status == 200
    settle()
    m = w.metrics()
    assert m("weir_upstream_server_connects_total", upstream="a", server=dead) == 0
    assert m("weir_upstream_server_requests_total", upstream="a", server=dead) == 0
    assert not origin.requests("/healthz")  # a TCP check sends no request


def test_a_probe_target_that_accepts_and_stalls_times_out_and_does_not_delay_a_reload(weir_factory, origin):
    stall = socket.socket()
    stall.bind(("127.0.0.1", 0))
    stall.listen(16)  # the kernel completes handshakes; nobody ever reads
    addr = "127.0.0.1:%d" % stall.getsockname()[1]
    try:
        w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr, addr], "health":
                                     'path = "/healthz"; interval = "1s"; timeout = "900ms"; fall = 1;'}],
                         routes=[{"path": "/", "upstream": "a"}], workers=2)
        wait_until(lambda: checks(w, addr, "timeout") >= 1, slack(4), what="the stalled check to time out")
        assert health(w, addr) == 0
        w.logged(lambda l: "no status line within 900 ms" in l)
        # waiting on a stalled server costs the prober nothing
        pid = prober_pid(w)
        f0 = harness.proc_stat(pid)
        time.sleep(2)
        f1 = harness.proc_stat(pid)
        ticks = (int(f1[11]) + int(f1[12])) - (int(f0[11]) + int(f0[12]))
        assert ticks < 50, "the prober used %d ticks of CPU in 2 s" % ticks
        # while checks stall (each holds its socket for 900 ms of every
        # second), a HUP is handled at once
        old = set(w.worker_pids())
        t0 = time.monotonic()
        w.signal(signal.SIGHUP)
        wait_until(lambda: any("reloaded" in l for l in w.error_lines()), slack(2), what="the reload")
        assert time.monotonic() - t0 < slack(2)
        wait_until(lambda: not (set(w.worker_pids()) & old), slack(5), what="old workers gone")
        assert health(w, addr) == 0  # kept across the reload
    finally:
        stall.close()


def test_health_state_is_kept_across_hup_and_a_new_server_starts_up(weir_factory, origin_factory, tmp_path):
    w, a, b = two_origins(weir_factory, origin_factory,
                          health='path = "/healthz"; interval = "500ms"; timeout = "400ms"; fall = 1; rise = 3;')
    health_set(b, 503)
    wait_until(lambda: health(w, b.addr) == 0, slack(3), what="b down")
    c = origin_factory("C")
    text = open(w.conf).read()
    w.write_raw_config(text.replace('"%s"; }' % b.addr, '"%s"; }, { address = "%s"; }' % (b.addr, c.addr)))
    n_b = len(b.requests("/echo"))
    w.signal(signal.SIGHUP)
    wait_until(lambda: any("reloaded" in l for l in w.error_lines()), slack(3), what="the reload")
    # the new server starts up; the down one stays down through the reload,
    # with no request let through while the new prober starts
    assert health(w, c.addr) == 1
    for _ in range(3):
        assert health(w, b.addr) == 0
        spread(w, 5)
    assert len(b.requests("/echo")) == n_b
    assert c.requests("/echo")
    health_set(b, 200)
    wait_until(lambda: health(w, b.addr) == 1, slack(4), what="b back after rise checks")


def test_health_state_is_kept_across_a_binary_upgrade(weir_factory, origin_factory, masters, private_binary):
    a, b = origin_factory("A"), origin_factory("B")
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [a.addr, b.addr], "health":
                     'path = "/healthz"; interval = "300ms"; timeout = "250ms"; fall = 1; rise = 2;'}],
                     routes=[{"path": "/", "upstream": "a"}], workers=2)
    w.pid_file = os.path.join(w.dir, "weir.pid")
    with open(w.conf, "a") as f:
        f.write('pid_file = "%s";\n' % w.pid_file)
    w.start()
    health_set(b, 503)
    wait_until(lambda: health(w, b.addr) == 0, slack(3), what="b down")
    old_pid, n_b = w.pid, len(b.requests("/echo"))
    w.signal(signal.SIGUSR2)
    new_pid = wait_until(lambda: (lambda p: p if p and p != old_pid else None)(read_pid(w.pid_file)),
                         slack(10), what="the new master's pid file")
    masters.append(new_pid)
    assert w.wait_exit(10) == 0, "the old master did not hand over"
    # the new master's prober starts from the words the old one left
    for _ in range(3):
        assert health(w, b.addr) == 0
        spread(w, 5)
    assert len(b.requests("/echo")) == n_b
    assert health(w, a.addr) == 1
    health_set(b, 200)
    wait_until(lambda: health(w, b.addr) == 1, slack(4), what="b back under the new master")
    spread(w, 10)
    assert len(b.requests("/echo")) > n_b


def test_a_prober_that_dies_is_replaced_and_checks_go_on(weir_factory, origin_factory):
    w, a, b = two_origins(weir_factory, origin_factory, workers=2)
    pid = wait_until(lambda: prober_pid(w), slack(3), what="the prober's start line")
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: prober_pid(w) not in (None, pid), slack(5), what="a new prober")
    w.logged(lambda l: "health prober (pid %d) was killed by signal 9" % pid in l)
    health_set(b, 500)
    wait_until(lambda: health(w, b.addr) == 0, slack(3), what="b down, checked by the new prober")
    assert w.metrics()("weir_workers_alive") == 2


def check_config(tmp_path, health, name="weir.conf"):
    text = harness.render_config(str(tmp_path), free_port(), free_port(),
                                 [{"name": "a", "servers": ["127.0.0.1:9"], "health": health}],
                                 [{"path": "/", "upstream": "a"}])
    p = tmp_path / name
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10),
                       stdin=subprocess.DEVNULL)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "health = {" in l)
    return r.returncode, r.stderr.decode(errors="replace"), str(p), line


@pytest.mark.parametrize("health,message", [
    ('type = "udp";', "upstreams.health.type"),
    ('path = "healthz";', "must start with '/'"),
    ('path = "/a b";', "must start with '/'"),
    ('expect = [ "200-99" ];', "upstreams.health.expect entries"),
    ('expect = [ "600" ];', "upstreams.health.expect entries"),
    ('expect = "200";', "upstreams.health.expect must be a list"),
    ('interval = "1s"; timeout = "2s";', "timeout (2000 ms) must be at most interval (1000 ms)"),
    ('interval = "1s"; jitter = "1s";', "jitter (1000 ms) must be below interval (1000 ms)"),
    ('rise = 0;', "upstreams.health.rise"),
    ('fall = 101;', "upstreams.health.fall"),
    ('host = "a b";', "must be a host name or address"),
    ('retries = 3;', "unknown key"),
])
def test_weir_t_rejects_bad_health_values_with_file_and_line(tmp_path, health, message):
    rc, err, path, line = check_config(tmp_path, health)
    assert rc == 1, err
    assert re.search(r"^%s:%d: .*%s" % (re.escape(path), line, re.escape(message)), err, re.M), err


def test_weir_t_accepts_a_full_health_block_and_weir_T_prints_it(tmp_path):
    rc, err, path, _ = check_config(tmp_path, 'type = "http"; path = "/healthz?deep=1"; host = "api.internal"; '
                                    'expect = [ "200", "204-299" ]; interval = "5s"; timeout = "2s"; '
                                    'jitter = "500ms"; rise = 1; fall = 5;')
    assert rc == 0, err
    out = subprocess.run([WEIR_BIN, "-T", "-c", path], capture_output=True, timeout=slack(10)).stdout.decode()
    for want in ('path = "/healthz?deep=1";', 'host = "api.internal";', 'expect = [ "200", "204-299" ];',
                 'interval = "5s";', 'jitter = "500ms";', "rise = 1;", "fall = 5;"):
        assert want in out, out
    # and what -T prints checks again
    p2 = tmp_path / "dumped.conf"
    p2.write_text(out)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p2)], capture_output=True, timeout=slack(10))
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed")
@pytest.mark.parametrize("kind", ["http", "tcp"])
def test_checks_of_a_tls_group_verify_the_certificate_as_the_group_says(weir_factory, tls_origin, pki, kind):
    hc = 'type = "%s"; interval = "200ms"; timeout = "150ms"; fall = 1;' % kind
    w = weir_factory(start=False, workers=2, routes=[{"path": "/", "upstream": "good"}],
                     upstreams=[{"name": n, "servers": [tls_origin.addr], "health": hc} for n in ("good", "bad", "name")])
    text = open(w.conf).read()
    for name, tls in (("good", 'ca = "%s"; sni = "api.internal";' % pki["ca"]),
                      ("bad", 'ca = "%s"; sni = "api.internal";' % pki["other"]),
                      ("name", 'ca = "%s"; sni = "other.internal";' % pki["ca"])):
        old = '{ name = "%s"; ' % name
        assert old in text
        text = text.replace(old, '%stls = { %s }; ' % (old, tls))
    w.write_raw_config(text)
    w.start()
    s = tls_origin.addr
    wait_until(lambda: checks(w, s, "ok", "good") >= 2 and checks(w, s, "tls_failed", "bad") >= 1
               and checks(w, s, "tls_failed", "name") >= 1, slack(4), what="checks of the three groups")
    assert health(w, s, "good") == 1
    assert health(w, s, "bad") == 0 and health(w, s, "name") == 0
    assert checks(w, s, "tls_failed", "good") == 0
    log = "\n".join(w.error_lines())
    assert "upstream bad server %s: health down after 1 failed check(s) in a row (last: TLS handshake " \
           "failed: certificate:" % s in log, log
    assert "upstream name server %s: health down" % s in log, log
    r = w.get("/")
    assert r.status == 200 and b"sni=api.internal" in r.body, r


def test_skip_when_busy_trusts_real_traffic_and_checks_again_once_it_stops(weir_factory, origin_factory):
    w, a, b = two_origins(weir_factory, origin_factory, workers=2,
                          health=FAST + " skip_when_busy = true;")
    health_set(b, 503)  # its checks would fail, its real answers do not
    skipped0 = checks(w, b.addr, "skipped_busy")
    end = time.monotonic() + 2.0
    with w.client() as c:
        while time.monotonic() < end:
            r = c.request("GET", "/echo")
            assert r.status == 200, r
            time.sleep(0.005)
    assert checks(w, b.addr, "skipped_busy") - skipped0 >= 4
    assert health(w, b.addr) == 1
    # traffic stopped: the next checks are made, and fail
    wait_until(lambda: health(w, b.addr) == 0, slack(3), what="b down once idle")
    assert checks(w, b.addr, "bad_status") >= 2


def test_skip_when_busy_does_not_skip_a_check_while_the_server_answers_5xx(weir_factory, origin_factory):
    w, a, b = two_origins(weir_factory, origin_factory, workers=2,
                          health=FAST + " skip_when_busy = true;")
    health_set(b, 503)
    end = time.monotonic() + 1.5
    with w.client() as c:
        while time.monotonic() < end and health(w, b.addr) != 0:
            c.request("GET", "/status/500")  # real requests that fail: no skip
            time.sleep(0.005)
    assert health(w, b.addr) == 0


def test_the_prober_reopens_its_log_on_usr1(weir_factory, origin_factory):
    w, a, b = two_origins(weir_factory, origin_factory, workers=1)
    os.rename(w.error_log, w.error_log + ".1")
    w.signal(signal.SIGUSR1)
    wait_until(lambda: any("USR1 received" in l for l in w.error_lines()), slack(3), what="the reopen")
    time.sleep(slack(0.3))  # the prober's signal is handled on its next loop pass
    health_set(b, 500)
    wait_until(lambda: any("health down" in l and b.addr in l for l in w.error_lines()), slack(3),
               what="the transition in the new log")


def test_an_http_check_sends_its_path_and_host_and_passes_on_the_expected_statuses(weir_factory, origin_factory):
    a = origin_factory("A")
    health_set(a, 503)
    w = weir_factory(upstreams=[{"name": "a", "servers": [a.addr], "health":
                                 'path = "/healthz?deep=1"; host = "api.internal"; expect = [ "200", "500-503" ]; '
                                 'interval = "200ms"; timeout = "150ms"; fall = 1;'}],
                     routes=[{"path": "/", "upstream": "a"}], workers=2)
    wait_until(lambda: checks(w, a.addr, "ok") >= 2, slack(3), what="checks passing on 503")
    assert health(w, a.addr) == 1
    e = a.requests("/healthz")[0]
    assert e["method"] == "GET" and e["target"] == "/healthz?deep=1" and e["version"] == "1.1", e
    assert [v for n, v in e["headers"] if n.lower() == "host"] == ["api.internal"], e
    assert [v for n, v in e["headers"] if n.lower() == "connection"] == ["close"], e
    assert [v for n, v in e["headers"] if n.lower() == "user-agent"] == ["weir-health-check"], e
    # one prober, not one per worker: checks come about once per interval
    n0, t0 = len(a.requests("/healthz")), time.monotonic()
    time.sleep(1.0)
    per_s = (len(a.requests("/healthz")) - n0) / (time.monotonic() - t0)
    assert per_s < 1 / INTERVAL * 1.5, "%.1f checks a second for one server" % per_s
    health_set(a, 404)
    wait_until(lambda: health(w, a.addr) == 0, slack(3), what="404 is not expected")
    assert upstreams_line(w, a.addr)["last_status"] == "404"


def listening_inodes():
    """Socket inodes of every TCP socket in LISTEN on this machine."""
    out = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A":
                        out.add(fields[9])
        except OSError:
            pass
    return out


def listeners_held(pid):
    held = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            held.append(link[8:-1])
    return set(held) & listening_inodes()


def test_the_prober_holds_no_listening_socket_at_start_or_after_a_reload(weir_factory, origin_factory):
    """A listener the prober kept open would stay in its reuseport group
    after the master closed it, and connections hashed to it would wait
    for an accept that never comes."""
    w, a, b = two_origins(weir_factory, origin_factory, workers=2)
    pid = wait_until(lambda: prober_pid(w), slack(3), what="the prober")
    assert not listeners_held(pid)
    w.signal(signal.SIGHUP)
    pid2 = wait_until(lambda: (lambda p: p if p not in (None, pid) else None)(prober_pid(w)), slack(3),
                      what="the new prober")
    assert not listeners_held(pid2)
