"""The stats socket (issue 4): Prometheus metrics checked by promtool and
scraped by a real Prometheus server, per-route and per-server counters that
survive reloads and worker restarts, the admin commands that change routing
live, the unix socket, and the remote-address check of `weir -t`."""

import collections
import json
import os
import shutil
import signal
import stat
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from harness import (STATS_TOKEN, WEIR_BIN, Client, free_port, settle, slack, wait_until)

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
NEED_PROM = "prometheus and promtool are missing: run tests/install-deps (Debian package prometheus)"


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def stats_request(port, method, target, body=None, token=STATS_TOKEN):
    """One request to the stats socket (POSTs with the harness's admin
    token); returns (status, text, response)."""
    headers = [("Connection", "close")]
    if method == "POST" and body is None:
        headers.append(("Content-Length", "0"))
    if method == "POST" and token:
        headers.append(("Authorization", "Bearer " + token))
    with Client(port, timeout=5) as c:
        r = c.request(method, target, host="127.0.0.1:%d" % port, headers=headers, body=body)
    return r.status, r.body.decode(), r


def admin(w, group, server, **args):
    """POST /upstreams/GROUP/SERVER?args; asserts it answered 200."""
    q = urllib.parse.urlencode(args)
    status, text, _ = stats_request(w.stats_port, "POST", "/upstreams/%s/%s?%s" % (group, server, q))
    assert status == 200, text
    return text


def origins_of(w, n, target="/"):
    """Who answered <n> requests, each on a new connection."""
    seen = collections.Counter()
    for _ in range(n):
        r = w.get(target)
        assert r.status == 200, r
        seen[r.get("X-Origin")] += 1
    return seen


def upstream_line(w, server):
    """The /upstreams line of <server> as a dict of its key=value fields."""
    _, text, _ = stats_request(w.stats_port, "GET", "/upstreams")
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[0] == "server" and parts[1] == server:
            return dict(p.split("=", 1) for p in parts[2:] if "=" in p)
    raise AssertionError("no server %s in /upstreams:\n%s" % (server, text))


def replace_stats_block(w, block, token=True):
    """Rewrites the stats line the harness wrote into w's config (keeping
    the harness's admin token in it unless <token> is false)."""
    with open(w.conf) as f:
        text = f.read()
    old = 'stats = { listen = "127.0.0.1:%d"; admin_token = "%s"; };' % (w.stats_port, STATS_TOKEN)
    if token and "admin_token" not in block:
        block = block.replace("stats = { ", 'stats = { admin_token = "%s"; ' % STATS_TOKEN, 1)
    assert old in text, text
    with open(w.conf, "w") as f:
        f.write(text.replace(old, block))


def reloads(w):
    return w.metrics()("weir_reloads_total", result="ok")


def hup_and_wait(w):
    before = reloads(w)
    w.signal(signal.SIGHUP)
    wait_until(lambda: reloads(w) > before, slack(5), what="reload counted")


def two_origin_weir(weir_factory, origin_factory, workers=1, weights=(None, None)):
    a, b = origin_factory("A"), origin_factory("B")
    w = weir_factory(upstreams=[{"name": "g", "servers": [(a.addr, weights[0]), (b.addr, weights[1])]}],
                     routes=[{"path": "/", "upstream": "g"}], workers=workers)
    return w, a, b


def monotonic_samples(m):
    """The samples of <m> that are counters (or parts of histograms)."""
    return {k: v for k, v in m.samples.items()
            if k[0].endswith(("_total", "_bucket", "_count", "_sum"))}


def assert_no_counter_went_back(before, after, when):
    back = [(k, v, after.samples.get(k)) for k, v in monotonic_samples(before).items()
            if after.samples.get(k, -1) < v]
    assert back == [], "counters went backwards %s: %r" % (when, back[:10])


class Prometheus:
    """A real Prometheus server on a free loopback port, scraping weir's
    stats socket every second, its data in a temporary directory."""

    def __init__(self, tmp_path, target_port):
        self.dir = tmp_path / "prometheus"
        self.dir.mkdir()
        self.port = free_port()
        self.target_port = target_port
        self.proc = None

    def start(self):
        conf = self.dir / "prometheus.yml"
        conf.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: weir\n    static_configs:\n"
            "      - targets: ['127.0.0.1:%d']\n" % self.target_port)
        self.log = open(self.dir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=%s" % conf, "--storage.tsdb.path=%s" % (self.dir / "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, start_new_session=True)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("prometheus exited: %s" % self.logs())
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port, timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_until(ready, slack(30), interval=0.2, what="prometheus ready")
        return self

    def logs(self):
        try:
            return (self.dir / "prometheus.log").read_text()[-3000:]
        except OSError:
            return ""

    def query(self, expr):
        """{frozenset(labels): value} of an instant query."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=5) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return {frozenset((k, v) for k, v in s["metric"].items() if k not in ("job", "instance")):
                float(s["value"][1]) for s in doc["data"]["result"]}

    def value(self, expr):
        res = self.query(expr)
        return sum(res.values()) if res else None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc:
            self.log.close()


@pytest.fixture
def prometheus(tmp_path):
    started = []

    def make(port):
        if not PROMETHEUS:
            pytest.fail(NEED_PROM)
        p = Prometheus(tmp_path, port)
        started.append(p)
        return p.start()
    yield make
    for p in started:
        p.stop()


# ---------------------------------------------------------------------------
# the exposition format
# ---------------------------------------------------------------------------

def test_promtool_finds_nothing_wrong_with_the_metrics(weir_factory, origin):
    # a path with a quote: label values must be escaped (a backslash, which
    # must be too, is refused in a route path: no request path can hold
    # one; tests/unit/master/test_textbuf.c proves its escape)
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"},
                             {"host": "*.example.com", "path": '/q\\"x', "upstream": "a"}])
    for _ in range(3):
        assert w.get("/").status == 200
    assert w.get('/q"x\\y/z', host="a.example.com").status == 400  # bad_path, before routing
    assert w.get("/", host="a.example.com").status == 404
    settle()
    status, text, r = stats_request(w.stats_port, "GET", "/metrics")
    assert status == 200
    assert r.get("Content-Type").startswith("text/plain; version=0.0.4")
    if not PROMTOOL:
        pytest.fail(NEED_PROM)
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), (p.stdout, p.stderr)
    # every family has HELP and TYPE, and every sample belongs to one
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
    helped = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    assert set(types) == helped
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{")[0].split()[0]
            base = name
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and name[:-len(suffix)] in types:
                    base = name[:-len(suffix)]
            assert base in types, line
            assert base.startswith("weir_"), line
    m = w.metrics()
    assert m("weir_build_info", version=m.text.split('weir_build_info{version="')[1].split('"')[0]) == 1
    assert m("weir_route_requests_total", host='*.example.com', path='/q\\"x') == 0
    assert m("weir_route_requests_total", host="*", path="/") == 3
    assert m("weir_route_request_duration_seconds_count", host="*", path="/") == 3
    assert m("weir_route_request_duration_seconds_bucket", host="*", path="/", le="+Inf") == 3
    assert m("weir_upstream_server_requests_total", upstream="a", server=origin.addr) == 3
    assert m("weir_upstream_server_responses_total", upstream="a", server=origin.addr, **{"class": "2xx"}) == 3
    # the 400 and the 404 have no route: they are in the totals only
    assert m("weir_requests_total") == 5
    assert m("weir_responses_total", **{"class": "4xx"}) == 2
    assert m("weir_start_time_seconds") > 1.6e9


def test_a_prometheus_server_scrapes_exactly_the_requests_sent_per_route(weir_factory, origin, prometheus):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/one/", "upstream": "a"}, {"path": "/two/", "upstream": "a"}])
    prom = prometheus(w.stats_port)
    wait_until(lambda: prom.value("up") == 1, slack(15), interval=0.3, what="a first scrape of weir")
    for i in range(7):
        assert w.get("/one/%d" % i).status == 200
    for i in range(5):
        assert w.get("/two/%d" % i).status == 200

    want = {
        "weir_requests_total": 12,
        'weir_route_request_duration_seconds_count{path="/one/"}': 7,
        'weir_route_request_duration_seconds_count{path="/two/"}': 5,
        'weir_route_upstream_response_seconds_count{path="/one/"}': 7,
        'weir_route_requests_total{path="/two/"}': 5,
        'weir_route_responses_total{path="/one/",class="2xx"}': 7,
    }

    def scraped():
        got = {q: prom.value(q) for q in want}
        return got if got == want else None
    try:
        wait_until(scraped, slack(20), interval=0.5, what="prometheus to scrape the traffic")
    except AssertionError:
        raise AssertionError("prometheus has %r, want %r; its log:\n%s"
                             % ({q: prom.value(q) for q in want}, want, prom.logs()))
    # the histogram is usable as one: a quantile over the route's buckets
    q = prom.value('histogram_quantile(0.5, sum by (le) (weir_route_request_duration_seconds_bucket'
                   '{path="/one/"}))')
    # (the median of seven loopback requests: well under 0.1 s even with
    # both suites running side by side, where 6 ms was seen)
    assert q is not None and 0 < q <= 0.1, q


# ---------------------------------------------------------------------------
# counters across reloads and restarts
# ---------------------------------------------------------------------------

def test_per_route_and_per_server_counters_survive_a_reload_and_a_killed_worker(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}, {"path": "/api/", "upstream": "a"}])
    w.wait_workers(2)
    sent = 0

    def traffic(n):
        nonlocal sent
        for _ in range(n):  # separate connections: both workers count
            assert w.get("/api/x").status == 200
        sent += n
        settle()
        return w.metrics()

    m0 = traffic(10)
    assert m0("weir_route_requests_total", host="*", path="/api/") == 10

    # a reload that reorders the routes: route indices change, stat indices not
    w.write_config(upstreams=[{"name": "a", "servers": [origin.addr]}],
                   routes=[{"path": "/api/", "upstream": "a"}, {"path": "/", "upstream": "a"},
                           {"path": "/new/", "upstream": "a"}])
    hup_and_wait(w)
    m1 = w.metrics()
    assert_no_counter_went_back(m0, m1, "across a reload")
    m1 = traffic(10)
    assert_no_counter_went_back(m0, m1, "after a reload")

    # SIGKILL a worker: its counters are folded in, not lost
    restarts = m1("weir_worker_restarts_total")
    victim = w.wait_workers(2)[0]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: w.metrics()("weir_worker_restarts_total") > restarts, slack(5),
               what="the killed worker replaced")
    w.wait_workers(2)
    m2 = w.metrics()
    assert_no_counter_went_back(m1, m2, "across a killed worker")
    m3 = traffic(10)
    assert_no_counter_went_back(m2, m3, "after a killed worker")

    assert m3("weir_requests_total") == sent
    assert m3("weir_route_requests_total", host="*", path="/api/") == sent
    assert m3("weir_route_request_duration_seconds_count", host="*", path="/api/") == sent
    assert m3("weir_route_responses_total", host="*", path="/api/", **{"class": "2xx"}) == sent
    assert m3("weir_upstream_server_responses_total", upstream="a", server=origin.addr,
              **{"class": "2xx"}) == sent
    assert m3("weir_route_requests_total", host="*", path="/new/") == 0


# ---------------------------------------------------------------------------
# admin commands
# ---------------------------------------------------------------------------

def test_a_server_set_down_gets_no_requests_until_it_is_set_up(weir_factory, origin_factory):
    w, a, b = two_origin_weir(weir_factory, origin_factory, workers=2)
    assert set(origins_of(w, 10)) == {"A", "B"}

    text = admin(w, "g", b.addr, state="down")
    assert "state=down" in text
    assert upstream_line(w, b.addr)["state"] == "down"
    assert origins_of(w, 20) == {"A": 20}
    m = w.metrics()
    assert m("weir_upstream_server_admin_state", upstream="g", server=b.addr, state="down") == 1
    assert m("weir_upstream_server_admin_state", upstream="g", server=b.addr, state="up") == 0

    admin(w, "g", b.addr, state="up")
    assert upstream_line(w, b.addr)["state"] == "up"
    assert set(origins_of(w, 10)) == {"A", "B"}

    # drain takes a server out the same way; the other one then takes all
    admin(w, "g", a.addr, state="drain")
    assert origins_of(w, 10) == {"B": 10}
    # both out: no server is left for the group
    admin(w, "g", b.addr, state="down")
    assert w.get("/").status == 503
    admin(w, "g", a.addr, state="up")
    admin(w, "g", b.addr, state="up")
    assert set(origins_of(w, 10)) == {"A", "B"}


def test_a_weight_set_at_run_time_splits_requests_three_to_one(weir_factory, origin_factory):
    w, a, b = two_origin_weir(weir_factory, origin_factory, workers=1)
    admin(w, "g", a.addr, weight=3)
    line = upstream_line(w, a.addr)
    assert line["weight"] == "3" and line["configured_weight"] == "1"
    assert w.metrics()("weir_upstream_server_weight", upstream="g", server=a.addr) == 3
    seen = origins_of(w, 40)
    assert 28 <= seen["A"] <= 32 and seen["A"] + seen["B"] == 40, seen
    # back to the configured weights: an even split again
    admin(w, "g", a.addr, weight="default")
    assert upstream_line(w, a.addr)["weight"] == "1"
    seen = origins_of(w, 20)
    assert 9 <= seen["A"] <= 11, seen


def test_an_admin_override_outlives_a_reload_while_its_server_stays(weir_factory, origin_factory):
    w, a, b = two_origin_weir(weir_factory, origin_factory, workers=2)
    admin(w, "g", b.addr, state="down")
    admin(w, "g", a.addr, weight=5)
    # a reload that keeps both servers (in the other order): overrides stay
    w.write_config(upstreams=[{"name": "g", "servers": [b.addr, a.addr]}],
                   routes=[{"path": "/", "upstream": "g"}])
    hup_and_wait(w)
    assert upstream_line(w, b.addr)["state"] == "down"
    assert upstream_line(w, a.addr)["weight"] == "5"
    assert origins_of(w, 10) == {"A": 10}
    # a reload without B drops B's override: back in the config, B is up
    w.write_config(upstreams=[{"name": "g", "servers": [a.addr]}], routes=[{"path": "/", "upstream": "g"}])
    hup_and_wait(w)
    w.write_config(upstreams=[{"name": "g", "servers": [a.addr, b.addr]}],
                   routes=[{"path": "/", "upstream": "g"}])
    hup_and_wait(w)
    assert upstream_line(w, b.addr)["state"] == "up"
    assert upstream_line(w, a.addr)["weight"] == "5"
    seen = origins_of(w, 24)
    assert seen["B"] > 0, seen


def test_admin_commands_answer_404_405_and_400_in_plain_text(weir_factory, origin_factory):
    w, a, b = two_origin_weir(weir_factory, origin_factory)
    status, text, r = stats_request(w.stats_port, "GET", "/nope")
    assert status == 404 and "GET  /metrics" in text and "POST /upstreams/" in text, text
    assert r.get("Content-Type").startswith("text/plain")
    status, text, r = stats_request(w.stats_port, "DELETE", "/metrics")
    assert status == 405 and r.get("Allow") == "GET", r
    status, text, r = stats_request(w.stats_port, "GET", "/upstreams/g/%s?state=down" % b.addr)
    assert status == 405 and r.get("Allow") == "POST", r
    for target, why in [
            ("/upstreams/g/%s?state=sideways" % b.addr, "not one of up, drain, down"),
            ("/upstreams/g/%s?weight=0" % b.addr, "from 1 to 1000"),
            ("/upstreams/g/%s?weight=1001" % b.addr, "from 1 to 1000"),
            ("/upstreams/g/%s?colour=red" % b.addr, "unknown argument"),
            ("/upstreams/g/%s" % b.addr, "nothing to change"),
            ("/upstreams/g/not-an-address?state=up", "is not a server address"),
            ("/upstreams/g?state=up", "say which server")]:
        status, text, _ = stats_request(w.stats_port, "POST", target)
        assert status == 400 and why in text, (target, status, text)
    status, text, _ = stats_request(w.stats_port, "POST", "/upstreams/zz/%s?state=up" % b.addr)
    assert status == 404 and 'no upstream group "zz"' in text, text
    status, text, _ = stats_request(w.stats_port, "POST", "/upstreams/g/127.0.0.1:1?state=up")
    assert status == 404 and "has no server 127.0.0.1:1" in text, text
    # arguments as a form body, percent-encoded address
    status, text, _ = stats_request(w.stats_port, "POST", "/upstreams/g/%s" % b.addr.replace(":", "%3A"),
                                    body="state=drain")
    assert status == 200 and "state=drain" in text, text
    # oversized requests are refused, not read forever
    status, text, _ = stats_request(w.stats_port, "POST", "/upstreams/g/%s" % b.addr, body="x" * 4000)
    assert status == 413, text
    # none of it reached a worker
    assert w.metrics()("weir_requests_total") == 0


def test_info_and_routes_describe_the_running_configuration(weir_factory, origin_factory):
    a, b = origin_factory("A"), origin_factory("B")
    w = weir_factory(upstreams=[{"name": "api", "servers": [a.addr]}, {"name": "web", "servers": [b.addr]}],
                     routes=[{"path": "/", "upstream": "web"},
                             {"host": "api.example.com", "path": "/v1/", "upstream": "api"},
                             {"host": "*.example.com", "path": "/", "upstream": "web"}])
    _, text, _ = stats_request(w.stats_port, "GET", "/info")
    info = dict(line.split(" ", 1) for line in text.splitlines())
    assert info["workers_alive"] == "2" and info["config_generation"] == "1", info
    assert int(info["uptime_seconds"]) >= 0 and info["version"], info
    gen = int(info["routes_generation"])
    _, text, _ = stats_request(w.stats_port, "GET", "/routes")
    rows = [line.split() for line in text.splitlines()]
    assert rows == [["HOST", "PATH", "UPSTREAM"], ["api.example.com", "/v1/", "api"],
                    ["*.example.com", "/", "web"], ["*", "/", "web"]], text
    hup_and_wait(w)
    _, text, _ = stats_request(w.stats_port, "GET", "/info")
    info = dict(line.split(" ", 1) for line in text.splitlines())
    assert info["config_generation"] == "2" and int(info["routes_generation"]) > gen, info


# ---------------------------------------------------------------------------
# the unix socket and the remote-address check
# ---------------------------------------------------------------------------

def curl_unix(path, url, *args):
    p = subprocess.run(["curl", "-sS", "--max-time", "5", "--unix-socket", path, *args, url],
                       capture_output=True, timeout=15)
    assert p.returncode == 0, p.stderr
    return p.stdout.decode()


def test_a_unix_stats_socket_with_mode_0600_serves_curl(weir_factory, origin_factory, tmp_path):
    w, a, b = two_origin_weir(weir_factory, origin_factory, workers=2)
    w.stop()
    sock = str(tmp_path / "stats.sock")
    replace_stats_block(w, 'stats = { listen = "127.0.0.1:%d"; unix = "%s"; mode = "0600"; };'
                        % (w.stats_port, sock))
    w.start()
    st = os.stat(sock)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert w.get("/").status == 200
    settle()
    text = curl_unix(sock, "http://localhost/metrics")
    assert "# TYPE weir_requests_total counter" in text and "\nweir_requests_total 1\n" in text, text[:500]
    assert "state=down" in curl_unix(sock, "http://localhost/upstreams/g/%s?state=down" % b.addr, "-X", "POST")
    assert origins_of(w, 5) == {"A": 5}
    # a reload that changes the mode applies it to the socket it keeps
    with open(w.conf) as f:
        text = f.read()
    with open(w.conf, "w") as f:
        f.write(text.replace('mode = "0600"', 'mode = "0640"'))
    hup_and_wait(w)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o640
    # the old workers leave once drained: the two new ones are what stay
    wait_until(lambda: "workers_alive 2\n" in curl_unix(sock, "http://localhost/info"), slack(5),
               what="two workers alive")
    # a stop removes the file
    w.signal(signal.SIGTERM)
    assert w.wait_exit(5) == 0
    assert not os.path.exists(sock)


def test_a_stale_unix_socket_file_is_replaced_and_a_live_one_refused(weir_factory, origin, tmp_path):
    import socket as so
    sock = str(tmp_path / "stats.sock")
    stale = so.socket(so.AF_UNIX, so.SOCK_STREAM)
    stale.bind(sock)  # bound, never listening: what a killed weir leaves
    stale.close()
    w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    replace_stats_block(w, 'stats = { listen = "127.0.0.1:%d"; unix = "%s"; };' % (w.stats_port, sock))
    w.start()
    assert "weir_requests_total" in curl_unix(sock, "http://localhost/metrics")
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o660
    # a second weir on the same path finds it in use and does not start
    w2 = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                      routes=[{"path": "/", "upstream": "a"}])
    replace_stats_block(w2, 'stats = { listen = "127.0.0.1:%d"; unix = "%s"; };' % (w2.stats_port, sock))
    w2.start(wait=False)
    assert w2.wait_exit(5) == 1
    assert "another process is listening on it" in w2.read(w2.error_log) + w2.read(w2.stderr_path)
    assert "weir_requests_total" in curl_unix(sock, "http://localhost/metrics")


def test_a_binary_upgrade_keeps_the_unix_socket_the_counters_and_admin_state(
        weir_factory, origin_factory, tmp_path, monkeypatch):
    import harness
    # weir runs from a private copy, so a rebuild of build/weir meanwhile
    # (another layout) cannot turn this into an upgrade across layouts
    exe = str(tmp_path / "weir-copy")
    shutil.copy2(harness.WEIR_BIN, exe)
    monkeypatch.setattr(harness, "WEIR_BIN", exe)
    w, a, b = two_origin_weir(weir_factory, origin_factory, workers=2)
    w.stop()
    sock = str(tmp_path / "stats.sock")
    pid_file = str(tmp_path / "weir.pid")
    replace_stats_block(w, 'stats = { listen = "127.0.0.1:%d"; unix = "%s"; mode = "0600"; };\npid_file = "%s";'
                        % (w.stats_port, sock, pid_file))
    w.start()
    old = w.pid
    assert set(origins_of(w, 10)) == {"A", "B"}
    admin(w, "g", b.addr, state="down")
    settle()
    m0 = w.metrics()
    ino = os.stat(sock).st_ino

    w.signal(signal.SIGUSR2)
    assert w.wait_exit(10) == 0, "the old master did not hand over and exit"
    new = int(open(pid_file).read())
    assert new != old
    m1 = w.metrics()  # TCP stats socket, now served by the new master
    assert_no_counter_went_back(m0, m1, "across a binary upgrade")
    assert m1("weir_route_requests_total", host="*", path="/") == 10
    assert os.stat(sock).st_ino == ino  # the same socket, handed over
    assert "state=down" in curl_unix(sock, "http://localhost/upstreams")
    assert origins_of(w, 6) == {"A": 6}
    m2 = w.metrics()
    assert m2("weir_route_requests_total", host="*", path="/") == 16
    os.kill(new, signal.SIGTERM)
    wait_until(lambda: not os.path.exists(sock), slack(5), what="the new master to stop and remove the socket")


def weir_t(tmp_path, stats_block):
    conf = tmp_path / "check.conf"
    conf.write_text('%s\nlisteners = ( { address = "127.0.0.1:%d"; } );\n'
                    'upstreams = ( { name = "a"; servers = ( { address = "127.0.0.1:1"; } ); } );\n'
                    'routes = ( { upstream = "a"; } );\n' % (stats_block, free_port()))
    return subprocess.run([WEIR_BIN, "-t", "-c", str(conf)], capture_output=True, timeout=10)


def test_a_non_loopback_stats_address_needs_allow_remote(tmp_path):
    p = weir_t(tmp_path, 'stats = { listen = "0.0.0.0:9901"; };')
    assert p.returncode == 1
    assert b'stats.listen "0.0.0.0:9901" is not a loopback address' in p.stderr, p.stderr
    assert b"allow_remote" in p.stderr
    p = weir_t(tmp_path, 'stats = { listen = "0.0.0.0:9901"; allow_remote = true; };')
    assert p.returncode == 0, p.stderr
    for ok in ('stats = { listen = "127.0.0.1:9901"; };', 'stats = { listen = "[::1]:9901"; };',
               'stats = { unix = "/run/weir/stats.sock"; mode = "0660"; };'):
        p = weir_t(tmp_path, ok)
        assert p.returncode == 0, (ok, p.stderr)


def test_admin_commands_over_an_open_stats_socket_need_the_token(weir_factory, origin_factory, tmp_path):
    """allow_remote without a token: metrics and reads are served, changes
    refused (403) over TCP, still accepted on the unix socket. With
    admin_token: a POST without it or with a wrong one gets 401 and changes
    nothing; with it, the change takes effect."""
    token = "s3cret-Token_0123456789+/="
    w, a, b = two_origin_weir(weir_factory, origin_factory, workers=1)
    w.stop()
    sock = str(tmp_path / "stats.sock")
    replace_stats_block(w, 'stats = { listen = "127.0.0.1:%d"; allow_remote = true; unix = "%s"; };'
                        % (w.stats_port, sock), token=False)
    w.start()
    down = "/upstreams/g/%s?state=down" % b.addr
    status, text, _ = stats_request(w.stats_port, "POST", down, token=None)
    assert status == 403 and "admin_token" in text, (status, text)
    assert upstream_line(w, b.addr)["state"] == "up"
    assert stats_request(w.stats_port, "GET", "/metrics")[0] == 200
    assert "state=down" in curl_unix(sock, "http://localhost" + down, "-X", "POST")
    assert origins_of(w, 4) == {"A": 4}
    assert "state=up" in curl_unix(sock, "http://localhost/upstreams/g/%s?state=up" % b.addr, "-X", "POST")

    with open(w.conf) as f:
        text = f.read()
    with open(w.conf, "w") as f:
        f.write(text.replace("allow_remote = true;", 'allow_remote = true; admin_token = "%s";' % token))
    hup_and_wait(w)
    for auth in (None, "Bearer wrong-token-0123456789", "Basic " + token, "Bearer " + token + "x"):
        headers = [("Connection", "close"), ("Content-Length", "0")]
        if auth:
            headers.append(("Authorization", auth))
        with Client(w.stats_port, timeout=5) as c:
            r = c.request("POST", down, host="127.0.0.1", headers=headers)
        assert r.status == 401, (auth, r)
        assert r.get("WWW-Authenticate") == 'Bearer realm="weir admin"', r
    assert upstream_line(w, b.addr)["state"] == "up"
    with Client(w.stats_port, timeout=5) as c:
        r = c.request("POST", down, host="127.0.0.1",
                      headers=[("Connection", "close"), ("Content-Length", "0"),
                               ("Authorization", "Bearer " + token)])
    assert r.status == 200 and b"state=down" in r.body, r
    assert origins_of(w, 4) == {"A": 4}


def test_weir_t_checks_the_admin_token(tmp_path):
    for bad in ("short", "has space in it 0123456789", "x" * 129):
        p = weir_t(tmp_path, 'stats = { listen = "127.0.0.1:9901"; admin_token = "%s"; };' % bad)
        assert p.returncode == 1, bad
        assert b"check.conf:1: stats.admin_token" in p.stderr, p.stderr
        assert (b"must be 16 to 128 characters" if len(bad) <= 128 else b"too long") in p.stderr, p.stderr
    p = weir_t(tmp_path, 'stats = { listen = "0.0.0.0:9901"; allow_remote = true; '
                         'admin_token = "aGVsbG8gd29ybGQgMTIzNDU2Nzg5MA=="; };')
    assert p.returncode == 0, p.stderr


def test_scrapes_do_not_slow_the_workers_down_or_reach_them(weir_factory, origin):
    """A scrape is served by the master from the segment: a hundred of them
    during traffic are not counted as requests and leave no worker busier."""
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=[{"path": "/", "upstream": "a"}])
    deadline = time.monotonic() + slack(10)
    for i in range(100):
        assert stats_request(w.stats_port, "GET", "/metrics")[0] == 200
        if i % 10 == 0:
            assert w.get("/").status == 200
        assert time.monotonic() < deadline
    settle()
    assert w.metrics()("weir_requests_total") == 10
