"""Canary and weighted splits (docs/config.md, "Splits"): a route's
requests shared between groups by a bucket of their key's hash, a key
staying on its side across workers, a HUP and a USR2, raising a weight
moving only buckets towards the side that grew, the override, the
fallback without a key, the counters and the access log, and `weir -t`.

The bucket function has no seed, so this file computes every key's side
itself (split_bucket below is common/split.h's) and asserts weir agrees
key by key: what another node would do too.
"""

import os
import re
import signal
import subprocess

from harness import WEIR_BIN, header_values, pid_alive, render_config, slack, wait_until
from test_metrics import stats_request
from test_rate_limit import one, upgrade_and_wait

M64 = (1 << 64) - 1


def split_bucket(key):
    h = 14695981039346656037
    for b in key:
        h = ((h ^ b) * 1099511628211) & M64
    h ^= h >> 30
    h = (h * 0xbf58476d1ce4e5b9) & M64
    h ^= h >> 27
    h = (h * 0x94d049bb133111eb) & M64
    h ^= h >> 31
    return h % 10000


def expected_side(key, weights):
    """The index of the side whose cumulative range holds the key's bucket."""
    b, total, cum = split_bucket(key.encode()), sum(weights), 0
    for i, w in enumerate(weights):
        cum += w
        if b < cum * 10000 // total or i == len(weights) - 1:
            return i


def split_text(w, origins, weights, key='split_key = "cookie:uid";', more="", extra="", raw=None):
    ups = [{"name": o.name, "servers": [o.addr], "keepalive": 16, "raw": (raw or {}).get(o.name, "")}
           for o in origins]
    sides = ", ".join('{ upstream = "%s"; weight = %d; }' % (o.name, wt) for o, wt in zip(origins, weights))
    return render_config(w.dir, w.port, w.stats_port, ups,
                         [{"path": "/", "extra": "split = ( %s ); %s %s" % (sides, key, more)}],
                         timeouts={"client_keepalive": "60s", "drain": "5s"}, extra=extra)


def start(weir_factory, origins, weights, **kw):
    w = weir_factory(start=False, upstreams=[{"name": "x", "servers": [origins[0].addr]}],
                     routes=[{"path": "/", "upstream": "x"}])
    w.write_raw_config(split_text(w, origins, weights, **kw))
    w.start()
    w.wait_workers()
    return w


def side_of(port, headers=(), target="/"):
    """The X-Origin of one request on a new connection (so the kernel
    spreads them over the workers)."""
    status, hdrs, body = one(port, target, headers)
    assert status == 200, (status, body[:200])
    return hdrs["x-origin"]


def sides_of(port, keys):
    return {k: side_of(port, [("Cookie", "a=1; uid=%s" % k)]) for k in keys}


def test_a_thousand_keys_land_where_the_bucket_hash_says_and_share_by_weight(weir_factory, origin_factory):
    v1, v2 = origin_factory("v1"), origin_factory("v2")
    w = start(weir_factory, [v1, v2], [95, 5])
    keys = ["user-%d" % i for i in range(1000)]
    got = sides_of(w.port, keys)
    want = {k: ("v1", "v2")[expected_side(k, [95, 5])] for k in keys}
    assert got == want
    n2 = sum(1 for v in got.values() if v == "v2")
    # 5% of 1,000 is 50; the binomial spread is about 7
    assert 25 <= n2 <= 75, n2
    m = w.metrics()
    assert m("weir_route_split_requests_total", host="*", path="/", upstream="v2") == n2
    assert m("weir_route_split_requests_total", host="*", path="/", upstream="v1") == 1000 - n2
    assert m("weir_route_split_unkeyed_total", host="*", path="/") == 0
    # /routes names the sides and their buckets
    _, text, _ = stats_request(w.stats_port, "GET", "/routes")
    assert [line.split() for line in text.splitlines()] == [["HOST", "PATH", "UPSTREAM"], ["*", "/", "v1:9500,v2:500"]]
    assert len(v2.requests()) == n2
    # the access log names the group each went to
    wait_until(lambda: len(w.access_lines()) >= 1000, slack(5), what="access log")
    groups = [re.search(r" group=(\S+)", l).group(1) for l in w.access_lines()]
    assert groups.count("v2") == n2


def test_a_key_keeps_its_side_across_workers_a_hup_and_a_usr2(weir_factory, origin_factory):
    v1, v2 = origin_factory("v1"), origin_factory("v2")
    w = weir_factory(start=False, upstreams=[{"name": "x", "servers": [v1.addr]}],
                     routes=[{"path": "/", "upstream": "x"}])
    pid_file = os.path.join(w.dir, "weir.pid")
    text = split_text(w, [v1, v2], [50, 50], extra='pid_file = "%s";' % pid_file)
    w.write_raw_config(text)
    w.start()
    w.wait_workers()
    keys = ["k%d" % i for i in range(150)]
    first = sides_of(w.port, keys)
    assert set(first.values()) == {"v1", "v2"}
    # each key asked again, several times, on new connections: whichever
    # worker takes it
    for _ in range(2):
        assert sides_of(w.port, keys) == first
    assert len(w.worker_pids()) == 2
    r0 = w.metrics()("weir_reloads_total", result="ok")
    w.signal(signal.SIGHUP)
    wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") == r0 + 1, slack(5), what="reload")
    assert sides_of(w.port, keys) == first
    old_pid = w.pid
    new_pid = upgrade_and_wait(w, old_pid)
    try:
        wait_until(lambda: not pid_alive(old_pid), slack(10), what="the old master gone")
        assert sides_of(w.port, keys) == first
    finally:
        if new_pid and pid_alive(new_pid):
            os.kill(new_pid, signal.SIGTERM)


def test_raising_the_canary_weight_moves_only_keys_towards_it(weir_factory, origin_factory):
    v1, v2 = origin_factory("v1"), origin_factory("v2")
    w = start(weir_factory, [v1, v2], [95, 5])
    keys = ["user-%d" % i for i in range(1000)]
    before = sides_of(w.port, keys)
    r0 = w.metrics()("weir_reloads_total", result="ok")
    w.write_raw_config(split_text(w, [v1, v2], [95, 10]))
    w.signal(signal.SIGHUP)
    wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") == r0 + 1, slack(5), what="reload")
    after = sides_of(w.port, keys)
    moved = [(before[k], after[k]) for k in keys if before[k] != after[k]]
    assert moved and all(m == ("v1", "v2") for m in moved), moved[:10]
    # 5/100 to 10/105 of the buckets: about 4.5% more keys on v2
    assert 20 <= len(moved) <= 75, len(moved)
    assert after == {k: ("v1", "v2")[expected_side(k, [95, 10])] for k in keys}


def test_the_override_forces_a_side_by_its_group_name(weir_factory, origin_factory):
    v1, v2 = origin_factory("v1"), origin_factory("v2")
    w = start(weir_factory, [v1, v2], [100, 0], more='split_override = { header = "X-Canary"; };')
    assert side_of(w.port, [("Cookie", "uid=u1")]) == "v1"  # weight 0: never by key
    assert side_of(w.port, [("Cookie", "uid=u1"), ("X-Canary", "v2")]) == "v2"
    assert side_of(w.port, [("X-Canary", "v2")]) == "v2"
    # a name that is no side's: the split decides
    assert side_of(w.port, [("Cookie", "uid=u1"), ("X-Canary", "v3")]) == "v1"
    m = w.metrics()
    assert m("weir_route_split_overridden_total", host="*", path="/") == 2
    assert m("weir_route_split_requests_total", host="*", path="/", upstream="v2") == 2
    assert m("weir_route_split_requests_total", host="*", path="/", upstream="v1") == 2


def test_an_override_cookie_and_a_query_key(weir_factory, origin_factory):
    v1, v2 = origin_factory("v1"), origin_factory("v2")
    w = start(weir_factory, [v1, v2], [50, 50], key='split_key = "query:user";',
              more='split_override = { cookie = "canary"; };')
    for k in ["q%d" % i for i in range(40)]:
        assert side_of(w.port, target="/x?a=1&user=%s" % k) == ("v1", "v2")[expected_side(k, [50, 50])]
    assert side_of(w.port, [("Cookie", "canary=v1")], target="/x?user=q0") == "v1"
    assert side_of(w.port, [("Cookie", "canary=v2")], target="/x?user=q0") == "v2"


def test_without_the_key_a_request_is_drawn_by_weight(weir_factory, origin_factory):
    v1, v2 = origin_factory("v1"), origin_factory("v2")
    w = start(weir_factory, [v1, v2], [50, 50])
    got = [side_of(w.port) for _ in range(200)]
    # drawn at random: both sides, roughly halves (sd about 7)
    assert 60 <= got.count("v2") <= 140, got.count("v2")
    # a cookie header without the key, and the key empty, are no key
    side_of(w.port, [("Cookie", "other=1")])
    side_of(w.port, [("Cookie", "uid=")])
    assert w.metrics()("weir_route_split_unkeyed_total", host="*", path="/") == 202


def test_the_chosen_group_goes_through_its_own_machinery(weir_factory, origin_factory):
    """The side's group is the one whose servers apply: a dead canary
    answers 502 for its keys only, and the v1 keys never notice."""
    v1, v2 = origin_factory("v1"), origin_factory("v2")
    w = start(weir_factory, [v1, v2], [50, 50])
    v2.stop()
    keys = ["k%d" % i for i in range(40)]
    for k in keys:
        want = expected_side(k, [50, 50])
        status, _, body = one(w.port, "/", [("Cookie", "uid=%s" % k)])
        assert status == (200 if want == 0 else 502), (k, body[:200])
    assert len(v1.requests()) == sum(1 for k in keys if expected_side(k, [50, 50]) == 0)


def test_a_split_route_applies_its_own_header_rules_not_its_groups(weir_factory, origin_factory):
    v1, v2 = origin_factory("v1"), origin_factory("v2")
    w = start(weir_factory, [v1, v2], [100, 0], raw={"v1": 'headers = { request = { set = { X-Group = "v1"; }; }; };'},
              more='split_override = { header = "X-Canary"; }; '
                   'headers = { request = { set = { X-Route = "split"; }; }; };')
    assert side_of(w.port, [("Cookie", "uid=a")]) == "v1"
    assert side_of(w.port, [("X-Canary", "v2")]) == "v2"
    for o in (v1, v2):
        (e,) = o.requests()
        assert header_values(e, "X-Route") == ["split"] and header_values(e, "X-Group") == [], e["headers"]


# ---------------------------------------------------------------------------
# weir -t
# ---------------------------------------------------------------------------

def check(tmp_path, route_extra, upstream_line=True):
    text = render_config(str(tmp_path), 18080, 18081,
                         [{"name": "v1", "servers": ["127.0.0.1:9"]}, {"name": "v2", "servers": ["127.0.0.1:9"]}],
                         [{"path": "/", "upstream": "v1" if upstream_line else None, "extra": route_extra}])
    p = tmp_path / "weir.conf"
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True, timeout=slack(10),
                       stdin=subprocess.DEVNULL)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if 'path = "/"' in l)
    return r.returncode, r.stderr.decode(), "%s:%d: " % (p, line)


SIDES = 'split = ( { upstream = "v1"; weight = 95; }, { upstream = "v2"; weight = 5; } ); '


def test_weir_t_takes_a_split_and_refuses_bad_ones_with_their_line(tmp_path):
    rc, err, _ = check(tmp_path, SIDES + 'split_key = "cookie:uid"; split_override = { header = "X-Canary"; };',
                       upstream_line=False)
    assert rc == 0, err
    bad = [
        (SIDES, True, "routes.split and routes.upstream exclude each other"),
        ('split = ( { upstream = "v3"; weight = 1; } );', False, 'routes.split upstream "v3" is not defined'),
        ('split = ( { upstream = "v1"; weight = 0; }, { upstream = "v2"; weight = 0; } );', False,
         "the weights add up to 0"),
        ('split = ( { upstream = "v1"; weight = 1; }, { upstream = "v1"; weight = 2; } );', False,
         'names upstream "v1" twice'),
        ('split = ( { upstream = "v1"; weight = 10001; } );', False, "routes.split.weight must be"),
        ('split = ( { upstream = "v1"; } );', False, "routes.split.weight is required"),
        (SIDES + 'split_key = "route";', False, "routes.split_key"),
        (SIDES + 'split_key = "client_ip+cookie:a";', False, "routes.split_key"),
        (SIDES + 'split_key = "cookie:a;b";', False, "routes.split_key"),
        ('split_key = "cookie:uid";', True, "routes.split_key needs a routes.split"),
        (SIDES + 'split_override = { };', False, "needs one of header or cookie"),
        (SIDES + 'split_override = { header = "X-A"; cookie = "b"; };', False, "needs one of header or cookie"),
        (SIDES + 'split_override = { header = "X A"; };', False, "routes.split_override.header"),
        (SIDES + 'split_override = { query = "a"; };', False, "unknown key \"query\""),
    ]
    # weir -T writes it back, and what it writes loads to the same
    conf = str(tmp_path / "weir.conf")
    r = subprocess.run([WEIR_BIN, "-T", "-c", conf], capture_output=True, timeout=slack(10), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    dump = r.stdout.decode()
    assert ('split = ( { upstream = "v1"; weight = 95; }, { upstream = "v2"; weight = 5; } );' in dump and
            'split_key = "cookie:uid";' in dump and 'split_override = { header = "X-Canary"; };' in dump), dump
    (tmp_path / "dump.conf").write_text(dump)
    r2 = subprocess.run([WEIR_BIN, "-T", "-c", str(tmp_path / "dump.conf")], capture_output=True,
                        timeout=slack(10), stdin=subprocess.DEVNULL)
    routes = lambda t: t[t.index("routes = ("):].split(");")[0]  # (the admin token is masked: not a round trip)
    assert r2.returncode == 0 and routes(r2.stdout.decode()) == routes(dump), r2.stderr
    for extra, up, msg in bad:
        rc, err, where = check(tmp_path, extra, upstream_line=up)
        assert rc == 1 and msg in err and where in err, (extra, err)
