"""Load-balancing algorithms (issue 13, item 1): `balance = "random"` spreads
by weight, `"least_request"` sends to the server with the fewest requests in
flight node-wide (over weight) among `choices` drawn; every algorithm skips
servers drained by admin state; slow_start ramps a server that joins, comes
back from ejection or back up by its health checks; weir -t rejects bad
values with FILE:LINE. The hashing balancers: test_balance_hash.py."""

import subprocess
import threading
import time

from harness import WEIR_BIN, free_port, slack, wait_until
from test_metrics import admin


def group_weir(weir_factory, servers, balance, workers=2, raw=""):
    return weir_factory(upstreams=[{"name": "g", "servers": servers, "max_fails": 0,
                                    "raw": 'balance = "%s"; %s' % (balance, raw)}],
                        routes=[{"path": "/", "upstream": "g"}], workers=workers)


def origins_of(w, target, n):
    """<n> requests to <target>, each on a new connection (so every worker
    serves some); returns the X-Origin of each."""
    out = []
    for _ in range(n):
        with w.client() as c:
            r = c.request("GET", target)
            assert r.status == 200, r
            out.append(r.get("X-Origin"))
    return out


def hammer(w, target, threads, seconds):
    """<threads> clients sending <target> in a loop for <seconds>, each on
    its own kept-alive connection; returns the X-Origin of every answer."""
    seen, lock, stop = [], threading.Lock(), time.monotonic() + seconds

    def run():
        with w.client(timeout=10) as c:
            while time.monotonic() < stop:
                r = c.request("GET", target)
                assert r.status == 200, r
                with lock:
                    seen.append(r.get("X-Origin"))

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=seconds + slack(15))
    return seen


def in_flight(w, server):
    return w.metrics()("weir_upstream_server_in_flight", upstream="g", server=server)


def test_least_request_favours_the_idle_server_when_one_is_slow(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = group_weir(weir_factory, [a.addr, b.addr], "least_request")
    # A takes 300 ms per request, B answers at once: A's requests stay in
    # flight, counted node-wide, so both workers send most requests to B;
    # round robin would split them evenly
    seen = hammer(w, "/on/A/sleep/300/echo", threads=6, seconds=3)
    na, nb = seen.count("A"), seen.count("B")
    assert na + nb == len(seen) and nb > 0
    assert na * 5 < nb, (na, nb)
    # every count given back once the requests ended
    wait_until(lambda: in_flight(w, a.addr) == 0 and in_flight(w, b.addr) == 0, slack(3),
               what="in-flight counts back to 0")


def test_least_request_counts_requests_in_flight_node_wide(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = group_weir(weir_factory, [a.addr, b.addr], "least_request", workers=2)
    held = []
    try:
        # four slow requests on their own connections, over both workers:
        # each goes to the server with fewer in flight, so they split 2 and 2
        for _ in range(4):
            c = w.client(timeout=10)
            c.send(b"GET /sleep/1200/echo HTTP/1.1\r\nHost: localhost\r\n\r\n")
            held.append(c)
            time.sleep(0.15)  # picked before the next one is sent
        wait_until(lambda: in_flight(w, a.addr) + in_flight(w, b.addr) == 4, slack(2), what="4 in flight")
        assert (in_flight(w, a.addr), in_flight(w, b.addr)) == (2, 2)
        for c in held:
            assert c.read_response().status == 200
    finally:
        for c in held:
            c.close()
    wait_until(lambda: in_flight(w, a.addr) + in_flight(w, b.addr) == 0, slack(3), what="0 in flight")


def test_random_spreads_by_weight(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    # one worker: its round robin would be a fixed rotation, B A B B
    w = group_weir(weir_factory, [(a.addr, 1), (b.addr, 3)], "random", workers=1)
    seen = origins_of(w, "/echo", 200)
    na, nb = seen.count("A"), seen.count("B")
    assert na + nb == 200
    # expected 50 and 150; binomial sd ~6: generous bounds
    assert 20 <= na <= 85, (na, nb)
    # random, not a rotation: A twice in a row (about 12 times expected;
    # none at all has a chance below 1e-4), which rr never does at 1:3
    assert any(seen[i] == seen[i + 1] == "A" for i in range(len(seen) - 1)), seen


def test_every_algorithm_skips_a_drained_server(weir_factory, origin_factory):
    for balance in ("random", "least_request"):
        a, b = origin_factory("A"), origin_factory("B")
        w = group_weir(weir_factory, [a.addr, b.addr], balance)
        admin(w, "g", a.addr, state="drain")
        assert set(origins_of(w, "/echo", 20)) == {"B"}
        w.stop()
        a.stop()
        b.stop()


def weir_t_errors(tmp_path, group_text):
    conf = tmp_path / "check.conf"
    conf.write_text('listeners = ( { address = "127.0.0.1:%d"; } );\n'
                    'upstreams = ( { name = "a"; servers = ( { address = "127.0.0.1:1"; } );\n'
                    '%s } );\nroutes = ( { upstream = "a"; } );\n' % (free_port(), group_text))
    p = subprocess.run([WEIR_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=10)
    assert p.returncode == 1, p
    return p.stderr.decode()


def test_weir_t_refuses_a_bad_balance_with_file_and_line(tmp_path):
    err = weir_t_errors(tmp_path, '  balance = "fastest";')
    assert "check.conf:3:" in err and "balance" in err, err
    err = weir_t_errors(tmp_path, '  balance = "least_request";\n  choices = 1;')
    assert "check.conf:4:" in err and "choices" in err, err
    err = weir_t_errors(tmp_path, '  slow_start = "soon";')
    assert "check.conf:3:" in err and "slow_start" in err, err


def test_slow_start_ramps_a_joining_server_and_reloads_keep_the_ramp(weir_factory, origin_factory):
    from test_reload import hup_and_wait
    a, b = origin_factory("A"), origin_factory("B")
    window = 6.0

    def config(servers):
        return dict(upstreams=[{"name": "g", "servers": servers, "max_fails": 0,
                                "raw": 'slow_start = "%ds";' % window}],
                    routes=[{"path": "/", "upstream": "g"}], workers=1)

    w = weir_factory(**config([a.addr]))
    w.write_config(**config([a.addr, b.addr]))
    hup_and_wait(w)
    joined = time.monotonic()
    # a second reload in the ramp neither restarts nor skips it
    hup_and_wait(w)
    early = origins_of(w, "/echo", 40)
    assert time.monotonic() - joined < window / 2, "the machine is too slow to judge the ramp"
    # B's weight is 10 % rising towards A's 100 %: far below half
    assert 1 <= early.count("B") <= 12, early
    wait_until(lambda: time.monotonic() - joined > window + 0.5, window + 2, what="the ramp over")
    hup_and_wait(w)  # B is no newcomer to this generation: no new ramp
    late = origins_of(w, "/echo", 40)
    assert 16 <= late.count("B") <= 24, late


def test_slow_start_ramps_a_server_back_from_ejection(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = group_weir(weir_factory, [a.addr, b.addr], "rr", workers=1,
                   raw='slow_start = "6s"; outlier = { consecutive_5xx = 3; base_ejection_time = "1s"; };')

    def ejected():
        return w.metrics()("weir_upstream_server_ejected", upstream="g", server=a.addr)

    for _ in range(12):
        with w.client() as c:
            c.request("GET", "/on/A/status/503")
    assert ejected() == 1
    wait_until(lambda: ejected() == 0, slack(3), what="A back from ejection")
    back = time.monotonic()
    seen = []
    for _ in range(40):
        with w.client() as c:
            r = c.request("GET", "/echo")
            seen.append(r.get("X-Origin"))
    assert time.monotonic() - back < 3, "the machine is too slow to judge the ramp"
    assert 1 <= seen.count("A") <= 12, seen


def test_slow_start_ramps_a_server_back_up_by_its_health_checks(weir_factory, origin_factory):
    from test_health import FAST, health, health_set
    a, b = origin_factory("A"), origin_factory("B")
    window = 6.0
    w = weir_factory(upstreams=[{"name": "a", "servers": [a.addr, b.addr], "max_fails": 0, "health": FAST,
                                 "raw": 'slow_start = "%ds";' % window}],
                     routes=[{"path": "/", "upstream": "a"}], workers=1)
    wait_until(lambda: health(w, b.addr) == 1, slack(5), what="B up by its first checks")
    # B was there at startup: no ramp, an even split
    first = origins_of(w, "/echo", 40)
    assert 16 <= first.count("B") <= 24, first
    health_set(b, 500)
    wait_until(lambda: health(w, b.addr) == 0, slack(5), what="B down by its checks")
    assert set(origins_of(w, "/echo", 10)) == {"A"}
    health_set(b, 200)
    wait_until(lambda: health(w, b.addr) == 1, slack(5), interval=0.02, what="B back up by its checks")
    back = time.monotonic()
    early = origins_of(w, "/echo", 40)
    assert time.monotonic() - back < window / 2, "the machine is too slow to judge the ramp"
    # the prober stamped the ramp: B's weight starts at 10 % of A's, so
    # well below half of the requests in the first half of the window
    assert 1 <= early.count("B") <= 12, early
    wait_until(lambda: time.monotonic() - back > window + 0.5, window + 2, what="the ramp over")
    late = origins_of(w, "/echo", 40)
    assert 16 <= late.count("B") <= 24, late
