"""Rate limits (docs/config.md, "rate_limits"): exact across workers, kept
across HUP and USR2, each key kind, delay, dry run, concurrency given back
however a request ends, the 429 and its headers, the bounded table.

Exactness: a key at rest admits <burst> at once, then one per 1/rate, over
all workers together; a client that always has a request outstanding gets
exactly burst + rate x t over t seconds. The load loops below are bounded
(a few seconds) and only talk to 127.0.0.0/8.
"""

import os
import re
import signal
import socket
import threading
import time

import pytest

from harness import children_of, pid_alive, render_config, slack, wait_until


# ---------------------------------------------------------------------------
# config and clients
# ---------------------------------------------------------------------------

def rl_config(w, origin, limits, routes, workers=2, table=None, extra=""):
    """<limits>: the text of each rate_limits entry; <routes>: (path, [names])."""
    text = render_config(w.dir, w.port, w.stats_port, [{"name": "a", "servers": [origin.addr], "keepalive": 64}],
                         [{"path": p, "upstream": "a"} for p, _ in routes], workers=workers,
                         timeouts={"client_keepalive": "60s", "drain": "5s"},
                         extra=extra + ("\nrate_limit_table = %d;" % table if table else ""))
    text = text.replace('log = {', 'rate_limits = (\n%s\n);\nlog = {' % ",\n".join(
        "  { %s }" % l for l in limits), 1)
    for p, names in routes:
        if names:
            text = text.replace('path = "%s"; upstream = "a"; }' % p, 'path = "%s"; upstream = "a"; rate_limits = [ %s ]; }'
                                % (p, ", ".join('"%s"' % n for n in names)), 1)
    text = text.replace('access = "%s/access.log"' % w.dir, 'access = "off"')
    w.write_raw_config(text)
    w.workers = workers
    return text


def start(weir_factory, origin, limits, routes, **kw):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    rl_config(w, origin, limits, routes, **kw)
    w.start()
    w.wait_workers()
    return w


def one(port, target="/", headers=(), src=None, method="GET", timeout=5.0):
    """One request on a new connection: (status, {header: value}, body)."""
    s = socket.socket()
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    h = "".join("%s: %s\r\n" % kv for kv in headers)
    s.sendall(("%s %s HTTP/1.1\r\nHost: t\r\n%sConnection: close\r\n\r\n" % (method, target, h)).encode())
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


class Load:
    """<conns> keep-alive connections each with one request always
    outstanding, for <seconds>; reconnects when weir closes (a reload
    drains the old workers). Records (sent, received, status)."""

    def __init__(self, port, conns, seconds, target="/", headers=(), src=None):
        self.port, self.target, self.src = port, target, src
        self.req = ("GET %s HTTP/1.1\r\nHost: t\r\n%s\r\n" % (target, "".join("%s: %s\r\n" % kv for kv in headers))).encode()
        self.results = []
        self.errors = 0
        self.lock = threading.Lock()
        self.end = time.monotonic() + seconds
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(conns)]

    def __enter__(self):
        self.t0 = time.monotonic()
        self.wall0 = time.time()  # the origin's log clock
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *a):
        for t in self.threads:
            t.join(self.end - time.monotonic() + slack(10))

    def connect(self):
        s = socket.socket()
        s.settimeout(slack(10))
        if self.src:
            s.bind((self.src, 0))
        s.connect(("127.0.0.1", self.port))
        return s

    def run(self):
        s, buf, mine = None, b"", []
        while time.monotonic() < self.end:
            try:
                if s is None:
                    s, buf = self.connect(), b""
                sent = time.monotonic()
                s.sendall(self.req)
                while b"\r\n\r\n" not in buf:
                    b = s.recv(65536)
                    if not b:
                        raise ConnectionResetError("closed")
                    buf += b
                head, _, buf = buf.partition(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                n = int(m.group(1)) if m else 0
                while len(buf) < n:
                    b = s.recv(65536)
                    if not b:
                        raise ConnectionResetError("closed")
                    buf += b
                buf = buf[n:]
                mine.append((sent, time.monotonic(), status))
                if re.search(rb"(?i)\r\nconnection: *close", head):
                    s.close()
                    s = None
            except OSError:
                self.errors += 1
                if s:
                    s.close()
                s = None
                time.sleep(0.001)
        if s:
            s.close()
        with self.lock:
            self.results += mine

    def count(self, status):
        return sum(1 for r in self.results if r[2] == status)

    def span(self, status=200):
        """From the first request sent to the last answer of <status>."""
        got = [r for r in self.results if r[2] == status]
        return max(r[1] for r in got) - min(r[0] for r in self.results)


def decisions(w, limit, result):
    return w.metrics()("weir_rate_limit_decisions_total", limit=limit, result=result)


# ---------------------------------------------------------------------------
# weir -t
# ---------------------------------------------------------------------------

BAD = [
    ('name = "a"; key = "client_ip"; rate = "10/x"; ', "rate_limits.rate", "per second, minute or hour"),
    ('name = "a"; key = "client_ip"; rate = "0/s"; ', "rate_limits.rate", "1 to 1000000"),
    ('name = "a"; key = "client_ip+bogus"; rate = "1/s"; ', "rate_limits.key", "joined by '+'"),
    ('name = "a"; key = "header:"; rate = "1/s"; ', "rate_limits.key", "joined by '+'"),
    ('name = "a"; key = "client_ip"; ', "needs either", "neither"),
    ('name = "a"; key = "client_ip"; rate = "1/s"; concurrent = 3; ', "needs either", "both"),
    ('name = "a"; key = "client_ip"; concurrent = 3; mode = "delay"; ', "need a rate", ""),
    ('name = "a"; key = "client_ip"; rate = "1/s"; mode = "slow"; ', "rate_limits.mode", ""),
    ('name = "a"; key = "client_ip"; rate = "1/s"; burst = 0; ', "rate_limits.burst", ""),
    ('name = "a"; key = "client_ip"; rate = "1/s"; ipv4_mask = 33; ', "rate_limits.ipv4_mask", ""),
    ('name = "a"; key = "client_ip"; rate = "1/s"; scope = "cluster";', "needs a rate and a redis", ""),
    ('name = "a"; key = "client_ip"; rate = "1/s"; }, { name = "a"; key = "route"; rate = "1/s";',
     "already defined on line", ""),
]


@pytest.mark.parametrize("entry,what,detail", BAD)
def test_weir_t_refuses_a_bad_rate_limit_naming_file_and_line(weir_factory, origin, entry, what, detail):
    import subprocess
    import harness
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    rl_config(w, origin, [entry], [("/", ["a"])])
    p = subprocess.run([harness.WEIR_BIN, "-t", "-c", w.conf], capture_output=True, text=True, timeout=10)
    assert p.returncode != 0
    assert re.search(r"weir\.conf:\d+: .*%s" % re.escape(what), p.stderr), p.stderr
    assert detail in p.stderr, p.stderr


def test_weir_t_refuses_a_route_naming_an_unknown_limit(weir_factory, origin):
    import subprocess
    import harness
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    rl_config(w, origin, ['name = "a"; key = "client_ip"; rate = "1/s";'], [("/", ["a", "b"])])
    p = subprocess.run([harness.WEIR_BIN, "-t", "-c", w.conf], capture_output=True, text=True, timeout=10)
    assert p.returncode != 0
    assert re.search(r'weir\.conf:\d+: routes.rate_limits: "b" is not a defined rate limit', p.stderr), p.stderr


# ---------------------------------------------------------------------------
# exactness under load
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [2, 4])
def test_reject_admits_exactly_burst_plus_rate_times_t_over_all_workers(weir_factory, origin, workers):
    w = start(weir_factory, origin, ['name = "ip"; key = "client_ip"; rate = "50/s"; burst = 20;'],
              [("/", ["ip"])], workers=workers)
    with Load(w.port, 8, 3.0) as load:
        pass
    ok, refused = load.count(200), load.count(429)
    bound = 20 + 50 * load.span()
    assert refused > 5 * ok, (ok, refused)  # at full load: far more asked than allowed
    assert ok <= bound + 1, (ok, bound)
    # the upper bound is the exactness claim; the lower one only shows the
    # limiter is not stricter than its rate, judged loosely: on a loaded
    # machine (both builds' suites run side by side) the clients can stall
    # past what the burst absorbs, and a slot nobody asked for is gone
    assert ok >= 0.9 * bound - 3, (ok, bound)
    assert decisions(w, "ip", "allowed") == ok
    assert decisions(w, "ip", "rejected") == refused
    assert len(origin.requests()) == ok


def upgrade_and_wait(w, old_pid):
    pid_file = os.path.join(w.dir, "weir.pid")
    w.signal(signal.SIGUSR2)

    def new_master():
        try:
            p = int(open(pid_file).read().strip())
        except (OSError, ValueError):
            return None
        return p if p != old_pid and len(children_of(p)) == w.workers else None
    return wait_until(new_master, slack(10), interval=0.01, what="the new master and its workers")


def test_reject_stays_exact_across_a_hup_and_a_usr2_mid_run(weir_factory, origin):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    pid_file = os.path.join(w.dir, "weir.pid")
    limits = ['name = "ip"; key = "client_ip"; rate = "40/s"; burst = 40;']
    rl_config(w, origin, limits, [("/", ["ip"])], extra='pid_file = "%s";' % pid_file)
    w.start()
    w.wait_workers()
    old_pid, new_pid = w.pid, None
    r0 = w.metrics()("weir_reloads_total", result="ok")
    try:
        with Load(w.port, 8, 4.5) as load:
            time.sleep(1.5)
            w.signal(signal.SIGHUP)
            wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") == r0 + 1, slack(5), what="reload")
            time.sleep(1.0)
            new_pid = upgrade_and_wait(w, old_pid)
        ok = load.count(200)
        bound = 40 + 40 * load.span()
        # a state lost at either would have given another burst of 40
        assert ok <= bound + 1, (ok, bound, load.count(429))
        assert ok >= 0.9 * bound - 3, (ok, bound)  # loosely: see the test above
        assert len(origin.requests()) == ok
        assert pid_alive(new_pid) and not pid_alive(old_pid)
    finally:
        if new_pid and pid_alive(new_pid):
            os.kill(new_pid, signal.SIGTERM)


@pytest.mark.normal_only  # the gaps the origin sees are the machine's timing
@pytest.mark.parametrize("workers", [2, 4])
def test_delay_spaces_requests_exactly_and_refuses_past_the_queue(weir_factory, origin, workers):
    w = start(weir_factory, origin, ['name = "d"; key = "client_ip"; rate = "40/s"; burst = 3; mode = "delay";'],
              [("/", ["d"])], workers=workers)
    with Load(w.port, 8, 3.0) as load:
        pass
    ok, refused = load.count(200), load.count(429)
    # served one per 25 ms after the burst of 3 a key at rest may take at
    # once (shm/limit.h: over any interval t at most burst + rate x t),
    # whatever the number of workers; one more for the clocks
    bound = 3 + 40 * load.span()
    assert ok <= bound + 1, (ok, bound)
    # loosely, as above: a burst of 3 absorbs only a 75 ms stall
    assert ok >= 0.85 * bound - 3, (ok, bound)
    assert refused > 0
    assert decisions(w, "d", "delayed") > 0.8 * ok
    times = sorted(e["t"] for e in origin.requests())
    assert len(times) == ok
    gaps = [b - a for a, b in zip(times, times[1:])]
    # never ahead of the schedule: by any moment, at most one request per
    # 25 ms since the load began, plus the burst and one for the clocks.
    # A worker that stalls releases the requests that came due meanwhile
    # together, as it should (the origin got nothing during the stall), so
    # the gaps alone cannot judge a loaded machine's run
    ahead = [(k, round(t - load.wall0, 4)) for k, t in enumerate(times) if k > 1 + 3 + 1 + (t - load.wall0) / 0.025]
    assert not ahead, ahead[:10]
    # and a turn apart as a rule, where an unspaced load of 8 clients has
    # nearly every gap near 0 and a limit kept per worker half of 25 ms
    median = sorted(gaps)[len(gaps) // 2]
    assert 0.020 <= median <= 0.030, gaps[:40]


@pytest.mark.parametrize("workers", [2, 4])
def test_concurrent_holds_at_most_n_in_flight_over_all_workers(weir_factory, origin, workers):
    w = start(weir_factory, origin, ['name = "c"; key = "client_ip"; concurrent = 3;'], [("/", ["c"])],
              workers=workers)
    with Load(w.port, 10, 3.0, target="/slow/200") as load:
        pass
    ok, refused = load.count(200), load.count(429)
    starts = sorted(e["t"] for e in origin.requests())
    assert len(starts) == ok
    # each was at the origin 200 ms: never more than 3 at once there
    worst = max(sum(1 for t in starts if s <= t < s + 0.2) for s in starts)
    assert worst <= 3, worst
    assert ok >= 3 * 3.0 / 0.2 * 0.6, ok  # and it did keep 3 in flight
    assert refused > ok
    assert decisions(w, "c", "rejected") == refused
    # all given back: 3 at once again
    statuses = []
    threads = [threading.Thread(target=lambda: statuses.append(one(w.port, "/slow/300")[0])) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert statuses == [200, 200, 200]


# ---------------------------------------------------------------------------
# concurrency given back on every exit path
# ---------------------------------------------------------------------------

def test_concurrency_is_given_back_when_the_client_vanishes(weir_factory, origin):
    w = start(weir_factory, origin, ['name = "c"; key = "client_ip"; concurrent = 1;'], [("/", ["c"])])
    # 1: gone while its request waits for a slow upstream: the request
    # is abandoned (abort_on_client_close) and its place given back then,
    # not when the upstream would have answered
    s = socket.create_connection(("127.0.0.1", w.port))
    s.sendall(b"GET /slow/20000 HTTP/1.1\r\nHost: t\r\n\r\n")
    wait_until(lambda: origin.requests("/slow/20000"), slack(3), what="the slow request upstream")
    assert one(w.port, "/")[0] == 429
    s.close()
    wait_until(lambda: w.metrics().error("client_aborted") == 1, slack(3), what="the request abandoned")
    assert one(w.port, "/")[0] == 200
    # 2: gone in the middle of its request body
    s = socket.create_connection(("127.0.0.1", w.port))
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 100000)
    time.sleep(0.2)
    assert one(w.port, "/")[0] == 429
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()  # a reset
    wait_until(lambda: one(w.port, "/")[0] == 200, slack(3), what="the slot back after the client reset")
    # 3: an upstream that fails (502) and a request answered 404 by no route
    assert one(w.port, "/close-early")[0] == 502
    assert one(w.port, "/")[0] == 200
    m = w.metrics()
    assert m("weir_rate_limit_decisions_total", limit="c", result="rejected") >= 2
    assert m("weir_rate_limit_decisions_total", limit="c", result="allowed") == 6


def test_delay_is_bounded_and_a_client_that_leaves_while_queued_frees_nothing_it_did_not_take(
        weir_factory, origin):
    w = start(weir_factory, origin, ['name = "d"; key = "client_ip"; rate = "2/s"; burst = 2; mode = "delay";',
                                     'name = "c"; key = "client_ip"; concurrent = 2;'], [("/", ["d", "c"])])
    t0 = time.monotonic()
    out = []
    threads = [threading.Thread(target=lambda: out.append((one(w.port, "/")[0], time.monotonic() - t0)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(s for s, _ in out) == [200, 200]
    assert max(d for _, d in out) >= 0.45  # the second waited its turn (500 ms)
    # one queued behind that, its client gone before its turn: its
    # concurrency is given back when the timer is stopped with it
    s = socket.create_connection(("127.0.0.1", w.port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.05)
    s.close()
    time.sleep(1.2)
    st = [one(w.port, "/")[0] for _ in range(2)]
    assert st[0] == 200, st


# ---------------------------------------------------------------------------
# the answer
# ---------------------------------------------------------------------------

def test_a_429_says_when_and_a_client_that_waits_that_long_is_admitted(weir_factory, origin):
    w = start(weir_factory, origin, ['name = "slow"; key = "client_ip"; rate = "20/m"; burst = 1; legacy_headers = true;'],
              [("/", ["slow"])])
    assert one(w.port)[0] == 200
    st, h, body = one(w.port)
    assert st == 429
    assert body == b"429 Too Many Requests\n"
    wait = int(h["retry-after"])
    assert wait == 3  # one request each 3 s
    assert h["ratelimit-policy"] == '"slow";q=20;w=60'
    assert h["ratelimit"] == '"slow";r=0;t=3'
    assert h["x-ratelimit-limit"] == "20" and h["x-ratelimit-remaining"] == "0" and h["x-ratelimit-reset"] == "3"
    time.sleep(wait - 1.0)
    assert one(w.port)[0] == 429  # not yet
    time.sleep(1.05)
    assert one(w.port)[0] == 200  # Retry-After was the real wait
    assert w.metrics().error("rate_limited") == 2


def test_the_status_is_configurable_and_a_refused_post_closes_after_its_answer(weir_factory, origin):
    w = start(weir_factory, origin, ['name = "s"; key = "route"; rate = "1/m"; status = 503;'], [("/", ["s"])])
    assert one(w.port)[0] == 200
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(5)
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n")
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    assert data.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), data
    assert b"\r\nConnection: close\r\n" in data and b"\r\nRetry-After: " in data
    # a GET on a kept-alive connection: answered and the connection kept
    s = socket.create_connection(("127.0.0.1", w.port))
    s.settimeout(5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.3)
    data = s.recv(65536)
    assert data.count(b"HTTP/1.1 503") == 2 and b"Connection: close" not in data, data
    s.close()


# ---------------------------------------------------------------------------
# keys
# ---------------------------------------------------------------------------

def burst_of(port, n, **kw):
    return [one(port, **kw)[0] for _ in range(n)]


def test_header_keys_are_apart_and_missing_skips_or_shares(weir_factory, origin):
    w = start(weir_factory, origin, [
        'name = "k"; key = "header:X-Api-Key"; rate = "1/m"; burst = 2;',
        'name = "ks"; key = "header:X-Api-Key"; rate = "1/m"; burst = 2; missing = "shared";'],
        [("/skip/", ["k"]), ("/shared/", ["ks"])])
    assert burst_of(w.port, 3, target="/skip/", headers=[("X-Api-Key", "one")]) == [200, 200, 429]
    assert burst_of(w.port, 3, target="/skip/", headers=[("x-api-key", "two")]) == [200, 200, 429]
    assert burst_of(w.port, 5, target="/skip/") == [200] * 5  # no key: not limited
    assert burst_of(w.port, 3, target="/shared/") == [200, 200, 429]  # no key: one shared key
    assert burst_of(w.port, 1, target="/shared/", headers=[("X-Api-Key", "one")]) == [200]


def test_cookie_query_and_route_keys(weir_factory, origin):
    w = start(weir_factory, origin, [
        'name = "ck"; key = "cookie:sid"; rate = "1/m";',
        'name = "q"; key = "query:user"; rate = "1/m";',
        'name = "r"; key = "route"; rate = "1/m"; burst = 2;'],
        [("/c/", ["ck"]), ("/q/", ["q"]), ("/r/", ["r"])])
    ck = lambda v: [("Cookie", "a=1; sid=%s; b=2" % v)]
    assert burst_of(w.port, 2, target="/c/", headers=ck("x")) == [200, 429]
    assert burst_of(w.port, 1, target="/c/", headers=ck("y")) == [200]
    assert burst_of(w.port, 2, target="/q/?a=1&user=u1") == [200, 429]
    assert burst_of(w.port, 1, target="/q/?user=u2&a=1") == [200]
    assert burst_of(w.port, 1, target="/q/?user=u1x") == [200]
    # route: one key for everyone and every path under it
    assert [one(w.port, "/r/a")[0], one(w.port, "/r/b", src="127.0.0.2")[0], one(w.port, "/r/c")[0]] == [200, 200, 429]


def test_client_ip_masks_and_a_combined_key(weir_factory, origin):
    w = start(weir_factory, origin, [
        'name = "ip32"; key = "client_ip"; rate = "1/m";',
        'name = "ip24"; key = "client_ip"; rate = "1/m"; ipv4_mask = 24;',
        'name = "combo"; key = "client_ip+header:X-Api-Key"; rate = "1/m";'],
        [("/32/", ["ip32"]), ("/24/", ["ip24"]), ("/combo/", ["combo"])])
    assert one(w.port, "/32/", src="127.0.0.1")[0] == 200
    assert one(w.port, "/32/", src="127.0.0.2")[0] == 200   # another /32
    assert one(w.port, "/32/", src="127.0.0.1")[0] == 429
    assert one(w.port, "/24/", src="127.0.1.1")[0] == 200
    assert one(w.port, "/24/", src="127.0.1.77")[0] == 429  # the same /24
    assert one(w.port, "/24/", src="127.0.2.1")[0] == 200
    k = [("X-Api-Key", "k1")]
    assert one(w.port, "/combo/", headers=k, src="127.0.0.3")[0] == 200
    assert one(w.port, "/combo/", headers=k, src="127.0.0.4")[0] == 200   # same key, other address
    assert one(w.port, "/combo/", headers=[("X-Api-Key", "k2")], src="127.0.0.3")[0] == 200
    assert one(w.port, "/combo/", headers=k, src="127.0.0.3")[0] == 429


def test_several_limits_are_all_or_nothing_and_dry_run_never_refuses(weir_factory, origin):
    w = start(weir_factory, origin, [
        'name = "wide"; key = "route"; rate = "1/m"; burst = 3;',
        'name = "narrow"; key = "header:X-Api-Key"; rate = "1/m"; burst = 1;',
        'name = "dry"; key = "route"; rate = "1/m"; burst = 1; mode = "dry_run";'],
        [("/", ["wide", "narrow", "dry"])])
    k = lambda v: [("X-Api-Key", v)]
    assert one(w.port, headers=k("a"))[0] == 200
    # refused by narrow: wide must not lose a token for it
    for _ in range(5):
        assert one(w.port, headers=k("a"))[0] == 429
    assert one(w.port, headers=k("b"))[0] == 200
    assert one(w.port, headers=k("c"))[0] == 200
    assert one(w.port, headers=k("d"))[0] == 429  # wide: 3 taken, by a, b and c
    m = w.metrics()
    assert m("weir_rate_limit_decisions_total", limit="dry", result="dry_run") >= 2
    assert m("weir_rate_limit_decisions_total", limit="narrow", result="rejected") == 5
    assert m("weir_rate_limit_decisions_total", limit="wide", result="rejected") == 1
    w.logged(lambda l: "would refuse (dry run)" in l)


# ---------------------------------------------------------------------------
# reload: the same limit keeps its state, a changed rate applies to it, a
# changed key starts afresh
# ---------------------------------------------------------------------------

def test_a_reload_keeps_state_applies_a_new_rate_to_it_and_restarts_a_changed_key(weir_factory, origin):
    lim = 'name = "ip"; key = "%s"; rate = "%s"; burst = 2;'
    w = start(weir_factory, origin, [lim % ("client_ip", "1/m")], [("/", ["ip"])])

    def reload(key, rate):
        r0 = w.metrics()("weir_reloads_total", result="ok")
        rl_config(w, origin, [lim % (key, rate)], [("/", ["ip"])])
        w.signal(signal.SIGHUP)
        wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") == r0 + 1, slack(5), what="reload")
    assert burst_of(w.port, 3) == [200, 200, 429]
    reload("client_ip", "1/m")
    assert one(w.port)[0] == 429  # kept: not refilled by the reload
    reload("client_ip", "2/m")
    st, h, _ = one(w.port)
    # a faster rate, the state as it is: the TAT (120 s ahead after two
    # at 1/m) stays, the new rate decides from it: 120 + 30 - 2 x 30
    assert st == 429
    assert int(h["retry-after"]) in (89, 90), h
    reload("client_ip+route", "2/m")
    assert burst_of(w.port, 3) == [200, 200, 429]  # a new key: afresh
    w.logged(lambda l: 'rate limit "ip": its key or kind changed' in l)


# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------

def test_a_full_table_evicts_expired_then_least_recently_used(weir_factory, origin):
    # 10 keys: one bucket
    w = start(weir_factory, origin, ['name = "slow"; key = "header:K"; rate = "1/m";',
                                     'name = "fast"; key = "header:K"; rate = "1000/s";'],
              [("/slow/", ["slow"]), ("/fast/", ["fast"])], table=10)
    m = w.metrics()
    assert m("weir_rate_limit_table_capacity") == 10
    for i in range(9):
        assert one(w.port, "/slow/", headers=[("K", "k%d" % i)])[0] == 200
        time.sleep(0.003)
    assert one(w.port, "/fast/", headers=[("K", "f")])[0] == 200  # the newest, at rest 1 ms later
    time.sleep(0.05)
    assert w.metrics()("weir_rate_limit_table_keys") == 10
    assert one(w.port, "/slow/", headers=[("K", "k9")])[0] == 200
    m = w.metrics()
    assert m("weir_rate_limit_evictions_total", kind="expired") == 1
    assert m("weir_rate_limit_evictions_total", kind="lru") == 0
    assert one(w.port, "/slow/", headers=[("K", "k0")])[0] == 429  # k0, the least recently used, kept
    # touch k0 again above; now k1 is the least recently used
    assert one(w.port, "/slow/", headers=[("K", "k10")])[0] == 200
    m = w.metrics()
    assert m("weir_rate_limit_evictions_total", kind="lru") == 1
    assert one(w.port, "/slow/", headers=[("K", "k0")])[0] == 429   # still there
    assert one(w.port, "/slow/", headers=[("K", "k1")])[0] == 200   # evicted: from rest again
    assert w.metrics()("weir_rate_limit_table_keys") == 10


def test_a_table_full_of_requests_in_flight_limits_new_keys_together_and_counts_it(weir_factory, origin):
    w = start(weir_factory, origin, ['name = "c"; key = "header:K"; concurrent = 1;'], [("/", ["c"])], table=10)
    socks = []
    for i in range(10):
        s = socket.create_connection(("127.0.0.1", w.port))
        s.sendall(b"GET /slow/1500 HTTP/1.1\r\nHost: t\r\nK: k%d\r\n\r\n" % i)
        socks.append(s)
    wait_until(lambda: len(origin.requests("/slow/1500")) == 10, slack(3), what="10 requests in flight")
    # no room: the new keys share the limit's one overflow entry
    s = socket.create_connection(("127.0.0.1", w.port))
    s.sendall(b"GET /slow/500 HTTP/1.1\r\nHost: t\r\nK: new1\r\n\r\n")
    wait_until(lambda: origin.requests("/slow/500"), slack(3), what="the first new key admitted")
    assert one(w.port, "/", headers=[("K", "new2")])[0] == 429
    m = w.metrics()
    assert m("weir_rate_limit_decisions_total", limit="c", result="table_full") == 2
    assert m("weir_rate_limit_evictions_total", kind="lru") == 0
    for x in socks + [s]:
        x.close()
    wait_until(lambda: one(w.port, "/", headers=[("K", "new2")])[0] == 200, slack(5), what="room again")


def test_client_ip_is_the_proxy_protocol_address_and_ipv6_keys_are_slash_64(weir_factory, origin):
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    text = rl_config(w, origin, ['name = "ip"; key = "client_ip"; rate = "1/m";'], [("/", ["ip"])])
    text = text.replace('listeners = ( { address = "127.0.0.1:%d"; } );' % w.port,
                        'listeners = ( { address = "127.0.0.1:%d"; proxy_protocol = true; } );' % w.port)
    w.write_raw_config(text)
    w.start()

    def via(src):
        fam = "TCP6" if ":" in src else "TCP4"
        dst = "::1" if ":" in src else "127.0.0.1"
        s = socket.create_connection(("127.0.0.1", w.port))
        s.settimeout(5)
        s.sendall(("PROXY %s %s %s 40000 80\r\nGET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
                   % (fam, src, dst)).encode())
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        s.close()
        return int(data.split(b" ", 2)[1])
    # every connection comes from 127.0.0.1: the key is the balancer's client
    assert [via("192.0.2.1"), via("192.0.2.2"), via("192.0.2.1")] == [200, 200, 429]
    assert via("2001:db8:1:2::1") == 200
    assert via("2001:db8:1:2:ffff::9") == 429  # the same /64
    assert via("2001:db8:1:3::1") == 200


# ---------------------------------------------------------------------------
# scope = "cluster": two nodes and a real redis-server
# ---------------------------------------------------------------------------

class Redis:
    def __init__(self, tmp_path, port=None):
        import harness
        self.port = port or harness.free_port()
        self.dir = str(tmp_path)
        self.proc = None

    def start(self):
        import subprocess
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir],
                                     stdout=open(os.path.join(self.dir, "redis.out"), "ab"), stderr=subprocess.STDOUT)
        from harness import can_connect
        wait_until(lambda: can_connect(self.port), slack(5), what="redis-server")
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def redis(tmp_path):
    import shutil
    if not shutil.which("redis-server"):
        pytest.skip("no redis-server (tests/install-deps installs it)")
    r = Redis(tmp_path).start()
    yield r
    r.stop()


CLUSTER = 'name = "c"; key = "client_ip"; rate = "40/s"; burst = 10; scope = "cluster";%s'


def cluster_node(weir_factory, origin, redis_port, extra_limit=""):
    return start(weir_factory, origin, [CLUSTER % extra_limit], [("/", ["c"])],
                 extra='redis = { address = "127.0.0.1:%d"; interval = "100ms"; };' % redis_port)


def both(nodes, seconds):
    loads = [Load(n.port, 6, seconds) for n in nodes]
    for l in loads:
        l.__enter__()
    for l in loads:
        l.__exit__()
    ok = sum(l.count(200) for l in loads)
    span = max(max(r[1] for r in l.results) for l in loads) - min(min(r[0] for r in l.results) for l in loads)
    return ok, span


def test_cluster_limit_holds_over_two_nodes_and_fails_open_while_redis_is_gone(weir_factory, origin, redis):
    nodes = [cluster_node(weir_factory, origin, redis.port) for _ in range(2)]
    ok, span = both(nodes, 3.0)
    bound = 10 + 40 * span
    one_interval = 2 * 40 * 0.1  # each node learns the other's admissions an interval late
    assert ok <= bound + one_interval + 2, (ok, bound)
    assert ok >= 0.8 * bound, (ok, bound)  # and not far under it either
    assert all(n.metrics()("weir_rate_limit_redis_syncs_total", result="ok") > 5 for n in nodes)
    # redis killed: each node admits from its own state (fail open), counted
    redis.stop()
    for n in nodes:
        wait_until(lambda: n.metrics()("weir_rate_limit_redis_up") == 0, slack(3), what="redis seen gone")
    ok, span = both(nodes, 1.5)
    assert ok > 1.5 * 40 * span, ok  # both nodes at their full local rate
    assert any("cluster rate limits use this node's state alone" in l for n in nodes for l in n.error_lines())
    # redis back (empty): the nodes reconnect and hold the bound again
    redis.start()
    for n in nodes:
        wait_until(lambda: n.metrics()("weir_rate_limit_redis_up") == 1, slack(3), what="redis back")
    time.sleep(0.5)
    ok, span = both(nodes, 3.0)
    assert ok <= 10 + 40 * span + one_interval + 2, (ok, span)


def test_a_fail_closed_cluster_limit_refuses_while_redis_is_unreachable(weir_factory, origin, tmp_path):
    import harness
    w = cluster_node(weir_factory, origin, harness.closed_port(), ' fail_closed = true;')
    wait_until(lambda: w.metrics()("weir_rate_limit_redis_up") == 0, slack(3), what="redis seen unreachable")
    st, h, _ = one(w.port)
    assert st == 429 and h.get("retry-after") == "1", (st, h)
    assert w.metrics()("weir_rate_limit_decisions_total", limit="c", result="rejected") == 1
    assert len(origin.requests()) == 0


def test_client_ip_is_the_client_behind_trusted_proxies(weir_factory, origin):
    # worker/realip.h: the client X-Forwarded-For names through a trusted
    # peer is the key, not the proxy every request comes from
    w = start(weir_factory, origin, ['name = "ip"; key = "client_ip"; rate = "1/m";'], [("/ip/", ["ip"])],
              extra='trusted_proxies = [ "127.0.0.0/8" ];')
    xff = lambda a: [("X-Forwarded-For", a)]
    assert one(w.port, "/ip/", headers=xff("203.0.113.1"))[0] == 200
    assert one(w.port, "/ip/", headers=xff("203.0.113.2"))[0] == 200
    assert one(w.port, "/ip/", headers=xff("2001:db8::2"))[0] == 200
    assert one(w.port, "/ip/", headers=xff("203.0.113.1"))[0] == 429
    assert one(w.port, "/ip/")[0] == 200   # no header: the peer itself
    assert one(w.port, "/ip/")[0] == 429
