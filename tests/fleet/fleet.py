#!/usr/bin/python3
"""fleet.py: three weir nodes behind an L4 balancer, in network namespaces.

The setup docs/fleet.md describes, built on this machine and driven the way
an operator would drive it (run as root; `make fleet`):

    client netns "cl"               10.99.1.2       load.py
        |  veth
    balancer netns "lb"             10.99.1.1       router (ECMP), HAProxy,
                                    10.99.0.1       Prometheus, redis-server,
                                                    the operator
        |  veth
    bridge in netns "fab"
        |  veth (one per node)
    node netns n1, n2, n3           10.99.0.11-13   weir (master + 2 workers),
                                                    VIP 10.99.100.1 on lo,
                                                    origins on 127.0.0.1:9000/9001

  1. ECMP: lb routes the VIP through a multipath route over the three nodes
     (L4 hash, net.ipv4.fib_multipath_hash_policy = 1); connections spread,
     and weir sees the client's own address (routing, no NAT).
  2. Prometheus (static config) scrapes the three stats sockets; its
     sum(weir_requests_total) equals the sum read from the nodes directly.
  3. A config rolled out node by node under load: weir -t, HUP, the new
     route answers on that node before the next; zero failed requests.
  4. ECMP drain under load: remove the node's nexthop (established flows
     stay pinned to it by conntrack, see PINNING), then QUIT the node and
     wait for it to exit; zero failed requests.
  5. HAProxy in TCP mode (its own listener on the nodes, port 8088):
     `set server be/n2 state drain` over its runtime API, then QUIT the
     node; zero failed requests. HAProxy sends the PROXY protocol
     (send-proxy-v2) and weir sees the client's own address behind it
     (PROXY_PROTOCOL below; False shows HAProxy's address instead).
  6. A cluster-scoped rate limit (scope = "cluster", one redis-server in the
     balancer's netns that every node reaches): four client addresses send
     one API key through ECMP (then another through HAProxy), and the
     three nodes together admit what one limit allows (burst + rate x t,
     plus one sync interval's worth per node), far below three local
     limits' sum (--scope local shows it).

Everything lives in namespaces this script creates (names carry its pid) and
is removed in a finally block; every wait is bounded. Figures (requests,
failures, Prometheus vs nodes) are printed at the end.

    fleet.py [--weir build/weir] [--keep] [--unpinned] [--scope local]

--unpinned runs the ECMP drain without the conntrack pinning, to show what
the pinning is for (it reports the failures and does not fail on them).
--scope local gives the limit of 6 scope = "local" instead: each node then
limits alone, and the phase must fail (its bound is the cluster's).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import netns  # noqa: E402
ORIGIN = os.path.join(ROOT, "tests", "origin", "origin.py")
LOAD = os.path.join(HERE, "load.py")
PY = "/usr/bin/python3"

NET = "10.99.0"            # the nodes' segment (a bridge in the fabric netns)
LB_ADDR = NET + ".1"       # the balancer on that segment
CLIENT_NET = "10.99.1"     # the client side of the balancer
CLIENT_ADDR = CLIENT_NET + ".2"
LB_CLIENT_ADDR = CLIENT_NET + ".1"
VIP = "10.99.100.1"        # the fleet's virtual address, on every node's lo
PORT = 8080                # weir's listener for ECMP (and direct checks)
HAPROXY_NODE_PORT = 8088   # weir's listener for HAProxy's connections
STATS_PORT = 9901
HAPROXY_PORT = 8081        # HAProxy's frontend, on the client side
PROM_ADDR = "127.0.0.1:9090"  # Prometheus, inside the lb netns
TOKEN = "fleet-test-token-0123456789abcdef"
NODES = ("n1", "n2", "n3")

# The cluster rate limit (phase 6): one key (the X-Fleet-Key header) from
# several client addresses, reconciled through redis every LIMIT_INTERVAL.
REDIS_ADDR = "%s:6379" % LB_ADDR
LIMIT_RATE = 50            # per second
LIMIT_BURST = 20
LIMIT_INTERVAL = 0.1       # redis.interval, seconds
LIMIT_PATH = "/echo/limited"
CLIENT_SOURCES = [CLIENT_NET + ".%d" % i for i in range(2, 6)]

# True (weir reads the PROXY protocol, issue 15) makes HAProxy send it
# (send-proxy-v2 on each server line), gives the nodes' HAProxy listener
# `proxy_protocol = true`, and expects weir to see the client's own address
# behind HAProxy instead of HAProxy's; False, HAProxy's.
PROXY_PROTOCOL = True
HAPROXY_SERVER_OPTS = "check inter 500ms" + (" send-proxy-v2" if PROXY_PROTOCOL else "")

# Established ECMP flows keep their node when the multipath route changes:
# the first packet's nexthop is saved in the connection's conntrack mark,
# later packets carry it as fwmark and a rule per node routes them to that
# node alone. Without this the kernel rehashes every packet against the new
# nexthop set, and flows that land on another node are reset there.
# (docs/fleet.md has the same ruleset for operators.)
PINNING = """
table ip weir_pin {
    chain pre {
        type filter hook prerouting priority mangle; policy accept;
        ct mark != 0 meta mark set ct mark
    }
    chain post {
        type filter hook postrouting priority mangle; policy accept;
        ip daddr %(vip)s ct state new ct mark set rt ip nexthop map { %(map)s }
    }
}
"""


def log(msg):
    print("fleet: %s" % msg, flush=True)


class Failed(Exception):
    pass


class Fatal(Failed):
    """A failure waiting longer cannot mend (wait_until passes it on)."""


def run(args, timeout=15, check=True, ns=None, input=None):
    if ns is not None:
        args = ["ip", "netns", "exec", ns] + list(args)
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired:
        raise Failed("timed out after %ss: %s" % (timeout, " ".join(args)))
    if check and p.returncode != 0:
        raise Failed("%s: exit %d: %s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def wait_until(pred, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = pred()
            if v:
                return v
        except Fatal:
            raise
        except (Failed, OSError, ValueError, KeyError) as e:
            last = e
        time.sleep(interval)
    raise Failed("%s: not within %.0fs (%r)" % (what, timeout, last))


def parse_metrics(text):
    """{(name, frozenset(labels)): value} from the Prometheus text format."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        name, _, labels = key.partition("{")
        lab = frozenset()
        if labels:
            lab = frozenset(tuple(kv.split("=", 1)) for kv in labels.rstrip("}").split(",") if kv)
        out[(name, lab)] = float(value)
    return out


class Fleet:
    def __init__(self, weir, tmp):
        self.weir = os.path.abspath(weir)
        self.tmp = tmp
        self.net = netns.Namespaces("wf")
        self.ns_lb = self.net.name("lb")
        self.ns_fab = self.net.name("fab")
        self.ns_cl = self.net.name("cl")
        self.ns_node = {n: self.net.name(n) for n in NODES}
        self.procs = []            # every process we start: (name, Popen)
        self.weirs = {}            # node -> Popen of its master
        self.haproxy = None
        self.loads = 0
        self.scope = "cluster"     # the limit's scope (--scope local: the failing case)

    # ---- plumbing ------------------------------------------------------
    def addr(self, node):
        return "%s.%d" % (NET, 11 + NODES.index(node))

    def spawn(self, name, args, ns):
        out = open(os.path.join(self.tmp, name + ".out"), "ab")
        p = subprocess.Popen(["ip", "netns", "exec", ns] + list(args), stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        self.procs.append((name, p))
        return p

    def stop_proc(self, p, sig=signal.SIGTERM, timeout=5):
        if p.poll() is None:
            try:
                os.kill(p.pid, sig)  # the leader first: a weir master stops its workers
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # what is left of its group
        except ProcessLookupError:
            pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def http(self, url, method="GET", token=None, timeout=3, ns=None):
        """(status, body) of one request made from the lb namespace."""
        args = ["curl", "-s", "-g", "-m", str(timeout), "-o", "-", "-w", "\n%{http_code}",
                "-X", method]
        if token:
            args += ["-H", "Authorization: Bearer " + token]
        p = run(args + [url], timeout=timeout + 5, check=False, ns=ns or self.ns_lb)
        body, _, code = p.stdout.rpartition("\n")
        if p.returncode != 0:
            raise Failed("curl %s: exit %d %s" % (url, p.returncode, p.stderr.strip()))
        return int(code), body

    def metrics(self, node):
        code, body = self.http("http://%s:%d/metrics" % (self.addr(node), STATS_PORT))
        if code != 200:
            raise Failed("%s /metrics answered %d" % (node, code))
        return parse_metrics(body)

    def requests_total(self, node):
        return self.metrics(node)[("weir_requests_total", frozenset())]

    # ---- the network ---------------------------------------------------
    def build_network(self):
        self.net.add("fab")
        run(["ip", "-n", self.ns_fab, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.ns_fab, "link", "set", "br0", "up"])
        self.net.add("lb")
        for n in NODES:
            self.net.add(n)
        for i, (ns, addr) in enumerate([(self.ns_lb, LB_ADDR)] +
                                       [(self.ns_node[n], self.addr(n)) for n in NODES]):
            port = "p%d" % i
            self.net.veth(self.ns_fab, port, self.ns_fab, "eth0", ns)
            run(["ip", "-n", self.ns_fab, "link", "set", port, "master", "br0", "up"])
            self.net.address(ns, "eth0", addr + "/24")
        # the client, one hop away: the balancer routes for it
        self.net.add("cl")
        self.net.veth(self.ns_lb, "eth1", self.ns_lb, "eth0", self.ns_cl)
        self.net.address(self.ns_lb, "eth1", LB_CLIENT_ADDR + "/24")
        self.net.address(self.ns_cl, "eth0", CLIENT_ADDR + "/24")
        for a in CLIENT_SOURCES[1:]:  # more clients, for the rate limit
            run(["ip", "-n", self.ns_cl, "addr", "add", a + "/24", "dev", "eth0"])
        run(["ip", "-n", self.ns_cl, "route", "add", "default", "via", LB_CLIENT_ADDR])
        self.net.sysctl(self.ns_lb, "net.ipv4.ip_forward=1")
        for n in NODES:
            ns = self.ns_node[n]
            run(["ip", "-n", ns, "route", "add", CLIENT_NET + ".0/24", "via", LB_ADDR])
            run(["ip", "-n", ns, "addr", "add", VIP + "/32", "dev", "lo"])
            # answer ARP only for eth0's own address, never for the VIP
            self.net.sysctl(ns, "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2")
        self.net.sysctl(self.ns_lb, "net.ipv4.fib_multipath_hash_policy=1")
        # per-node tables for pinned flows (see PINNING)
        for i, n in enumerate(NODES):
            mark = str(11 + i)
            run(["ip", "-n", self.ns_lb, "route", "add", VIP + "/32", "via", self.addr(n),
                 "table", str(100 + 11 + i)])
            run(["ip", "-n", self.ns_lb, "rule", "add", "fwmark", mark, "lookup",
                 str(100 + 11 + i), "priority", str(100 + i)])
        self.set_ecmp(list(NODES))

    def set_ecmp(self, nodes):
        args = ["ip", "-n", self.ns_lb, "route", "replace", VIP + "/32"]
        for n in nodes:
            args += ["nexthop", "via", self.addr(n), "weight", "1"]
        run(args)

    def pin(self, on):
        if on:
            m = ", ".join("%s : %d" % (self.addr(n), 11 + i) for i, n in enumerate(NODES))
            run(["nft", "-f", "-"], ns=self.ns_lb, input=PINNING % {"vip": VIP, "map": m})
        else:
            run(["nft", "delete", "table", "ip", "weir_pin"], ns=self.ns_lb, check=False)

    # ---- the nodes -----------------------------------------------------
    def node_dir(self, node):
        d = os.path.join(self.tmp, node)
        os.makedirs(d, exist_ok=True)
        return d

    def node_config(self, node, v2=False):
        d = self.node_dir(node)
        ups = ['{ name = "app"; keepalive = 16; servers = ( { address = "127.0.0.1:9000"; } ); }']
        routes = ['{ path = "/"; upstream = "app"; }',
                  '{ path = "%s"; upstream = "app"; rate_limits = [ "fleet" ]; }' % LIMIT_PATH]
        if v2:
            ups.append('{ name = "v2"; keepalive = 16; servers = ( { address = "127.0.0.1:9001"; } ); }')
            routes.insert(0, '{ path = "/echo/v2"; upstream = "v2"; }')
        return "\n".join([
            "workers = 2;",
            'log = { error = "%s/error.log"; access = "%s/access.log"; level = "info"; };' % (d, d),
            'stats = { listen = "%s:%d"; allow_remote = true; admin_token = "%s"; };'
            % (self.addr(node), STATS_PORT, TOKEN),
            'listeners = ( { address = "0.0.0.0:%d"; }, { address = "0.0.0.0:%d";%s } );'
            % (PORT, HAPROXY_NODE_PORT, " proxy_protocol = true;" if PROXY_PROTOCOL else ""),
            "upstreams = ( %s );" % ", ".join(ups),
            "routes = ( %s );" % ", ".join(routes),
            'timeouts = { drain = "10s"; upstream_read = "5s"; };',
            'redis = { address = "%s"; interval = "%dms"; };' % (REDIS_ADDR, LIMIT_INTERVAL * 1000),
            'rate_limits = ( { name = "fleet"; key = "header:X-Fleet-Key"; rate = "%d/s"; '
            'burst = %d; scope = "%s"; } );' % (LIMIT_RATE, LIMIT_BURST, self.scope),
            "",
        ])

    def start_origins(self, node):
        ns = self.ns_node[node]
        for port, name in ((9000, node), (9001, node + "-v2")):
            # the log: what reached the origin (phase 6 counts it)
            self.spawn("origin-%s" % name, [PY, ORIGIN, "--listen", "127.0.0.1:%d" % port,
                                            "--name", name, "--log", self.origin_log(name)], ns)

    def origin_log(self, name):
        return os.path.join(self.tmp, "origin-%s.log" % name)

    def origin_count(self, name, prefix):
        """Requests for <prefix> the origin <name> answered (its log)."""
        n = 0
        with open(self.origin_log(name)) as fh:
            for line in fh:
                e = json.loads(line)
                if e.get("target", "").startswith(prefix) and not (
                        set(e) & {"error", "closed", "unread", "dropped"}):
                    n += 1
        return n

    def start_redis(self):
        d = os.path.join(self.tmp, "redis")
        os.makedirs(d, exist_ok=True)
        host, port = REDIS_ADDR.split(":")
        self.spawn("redis", ["redis-server", "--bind", host, "--port", port, "--save", "",
                             "--appendonly", "no", "--dir", d, "--protected-mode", "no"],
                   self.ns_lb)
        # asked from inside the balancer's netns: this script's cannot reach it
        wait_until(lambda: run(["redis-cli", "-h", host, "-p", port, "ping"], ns=self.ns_lb,
                               check=False).stdout.strip() == "PONG", 10, "redis-server ready")

    def wait_origins(self, node):
        # before weir: a connect refused by an origin not yet listening
        # would have weir skip that server for 10 s (its passive check)
        for name in (node, node + "-v2"):
            out = os.path.join(self.tmp, "origin-%s.out" % name)
            wait_until(lambda: "ready" in open(out).read(), 10, "origin %s ready" % name)

    def start_weir(self, node):
        conf = os.path.join(self.node_dir(node), "weir.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write(self.node_config(node))
        run([self.weir, "-t", "-c", conf], ns=self.ns_node[node])
        p = self.spawn("weir-" + node, [self.weir, "-c", conf], self.ns_node[node])
        self.weirs[node] = p

        def ready():
            if p.poll() is not None:
                raise Fatal("weir on %s exited %d at start (%s)" % (node, p.returncode,
                                                                    self.tmp))
            return self.requests_total(node) is not None
        wait_until(ready, 15, "weir on %s ready" % node)
        # and its listener answers on the node's own address
        wait_until(lambda: self.http("http://%s:%d/echo" % (self.addr(node), PORT))[0] == 200,
                   10, "weir on %s proxies" % node)

    def quit_weir(self, node, timeout=15):
        p = self.weirs[node]
        os.kill(p.pid, signal.SIGQUIT)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Failed("weir on %s still running %ds after QUIT" % (node, timeout))
        if rc != 0:
            raise Failed("weir on %s exited %d after QUIT" % (node, rc))

    # ---- HAProxy and Prometheus ---------------------------------------
    def start_haproxy(self):
        d = os.path.join(self.tmp, "haproxy")
        os.makedirs(d, exist_ok=True)
        self.haproxy_sock = os.path.join(d, "admin.sock")
        servers = "\n".join("    server %s %s:%d %s" % (n, self.addr(n), HAPROXY_NODE_PORT,
                                                        HAPROXY_SERVER_OPTS)
                            for n in NODES)
        cfg = os.path.join(d, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write("""global
    stats socket %(sock)s mode 600 level admin
defaults
    mode tcp
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend fe
    bind %(addr)s:%(port)d
    default_backend be
backend be
    balance roundrobin
%(servers)s
""" % {"sock": self.haproxy_sock, "addr": LB_CLIENT_ADDR, "port": HAPROXY_PORT,
       "servers": servers})
        run(["haproxy", "-c", "-f", cfg])
        self.haproxy = self.spawn("haproxy", ["haproxy", "-db", "-f", cfg], self.ns_lb)
        wait_until(lambda: self.haproxy_stat("n1") is not None, 10, "haproxy ready")
        wait_until(lambda: all(self.haproxy_stat(n)["status"] == "UP" for n in NODES), 10,
                   "haproxy sees all nodes UP")

    def haproxy_cmd(self, cmd):
        # the runtime API is a unix socket: namespaces do not matter for it
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        try:
            s.connect(self.haproxy_sock)
            s.sendall(cmd.encode() + b"\n")
            out = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        finally:
            s.close()
        return out.decode()

    def haproxy_stat(self, server):
        lines = self.haproxy_cmd("show stat").splitlines()
        head = lines[0].lstrip("# ").split(",")
        for line in lines[1:]:
            row = dict(zip(head, line.split(",")))
            if row.get("pxname") == "be" and row.get("svname") == server:
                return row
        return None

    def start_prometheus(self):
        d = os.path.join(self.tmp, "prometheus")
        os.makedirs(d, exist_ok=True)
        cfg = os.path.join(d, "prometheus.yml")
        targets = ", ".join("'%s:%d'" % (self.addr(n), STATS_PORT) for n in NODES)
        with open(cfg, "w") as f:
            f.write("""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: weir
    static_configs:
      - targets: [%s]
""" % targets)
        run(["promtool", "check", "config", cfg])
        self.spawn("prometheus", ["prometheus", "--config.file=" + cfg,
                                  "--storage.tsdb.path=" + os.path.join(d, "data"),
                                  "--web.listen-address=" + PROM_ADDR, "--log.level=warn"],
                   self.ns_lb)
        wait_until(lambda: self.prom_value('count(up{job="weir"} == 1)') == 3, 30,
                   "Prometheus scraping all three nodes")

    def prom_value(self, query, at=None):
        url = "http://%s/api/v1/query?query=%s" % (PROM_ADDR, urllib.parse.quote(query))
        if at is not None:
            url += "&time=%.3f" % at
        code, body = self.http(url)
        if code != 200:
            raise Failed("Prometheus answered %d: %s" % (code, body[:200]))
        r = json.loads(body)["data"]["result"]
        return float(r[0]["value"][1]) if r else None

    # ---- load ----------------------------------------------------------
    def load_start(self, name, host, port, duration=20, hold=NODES, extra=()):
        self.loads += 1
        d = os.path.join(self.tmp, "load%d-%s" % (self.loads, name))
        os.makedirs(d)
        ready = os.path.join(d, "ready")
        p = self.spawn("load-" + name, [PY, LOAD, "--host", host, "--port", str(port),
                                        "--conns", "6", "--reuse", "10", "--duration",
                                        str(duration), "--stop-file", os.path.join(d, "stop"),
                                        "--out", os.path.join(d, "result.json"),
                                        "--ready-file", ready, "--hold", ",".join(hold)]
                       + list(extra),
                       self.ns_cl)
        wait_until(lambda: os.path.exists(ready), 10, "load %s started" % name)
        return (p, d)

    def load_stop(self, load):
        p, d = load
        open(os.path.join(d, "stop"), "w").close()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            raise Failed("load did not stop")
        with open(os.path.join(d, "result.json")) as f:
            r = json.load(f)
        if r["hit_deadline"]:
            raise Failed("load ran into its own deadline: the test took too long")
        return r

    def teardown(self):
        for name, p in reversed(self.procs):
            self.stop_proc(p)
        self.net.remove_all()


def origin_of(code, body):
    try:
        return json.loads(body)["origin"] if code == 200 else "status %d" % code
    except (ValueError, KeyError):
        return "not /echo: %r" % body[:80]


def served(r, origin, after=None, before=None):
    """Answers from <origin> in load result <r> between two wall times."""
    n = 0
    for slot, c in r["slots"].get(origin, {}).items():
        t = int(slot) / 10.0
        if (after is None or t >= after) and (before is None or t < before):
            n += c
    return n


def check_load(r, what, figures):
    figures.append("%s: %d requests, %d failed, %d connections (%d closed by a drain), by origin %s"
                   % (what, r["ok"] + r["failed"], r["failed"], r["connections"],
                      r["closes_by_server"],
                      {o: sum(s.values()) for o, s in sorted(r["slots"].items())}))
    if r["failed"]:
        raise Failed("%s: %d failed requests, e.g. %s" % (what, r["failed"], r["failures"][:5]))
    if r["ok"] < 100:
        raise Failed("%s: only %d requests: no load to speak of" % (what, r["ok"]))


def phase_ecmp_spread(f, figures):
    load = f.load_start("ecmp", VIP, PORT)
    time.sleep(3)
    r = f.load_stop(load)
    check_load(r, "ECMP spread", figures)
    for n in NODES:
        if served(r, n) < 10:
            raise Failed("ECMP: node %s answered %d requests: not spread" % (n, served(r, n)))
    # routed, not proxied: weir sees the client itself
    if r["clients"] != [CLIENT_ADDR]:
        raise Failed("ECMP: weir saw clients %s, not %s" % (r["clients"], CLIENT_ADDR))
    figures.append("ECMP: weir saw the client as %s" % ", ".join(r["clients"]))
    f.spread_load = r


def phase_prometheus(f, figures):
    # the load has stopped: the counters hold still, so the scrape after
    # this moment must see exactly what the nodes say
    direct = wait_until(lambda: (lambda a, b: a == b and a)(
        [f.requests_total(n) for n in NODES], [f.requests_total(n) for n in NODES]), 10,
        "node counters settle")
    want = sum(direct)
    got = wait_until(lambda: (lambda v: v if v == want else None)(
        f.prom_value("sum(weir_requests_total)")), 10,
        "Prometheus sum(weir_requests_total) == %d" % want)
    figures.append("Prometheus: sum(weir_requests_total) = %d; nodes read directly: %s = %d"
                   % (got, " + ".join("%d" % v for v in direct), want))
    # the fleet's request rate over the load's last two seconds, against
    # what the client counted in the same two seconds
    r = f.spread_load
    end = int(r["end"])
    rate = f.prom_value("sum(rate(weir_requests_total[2s]))", at=end)
    client = sum(served(r, n, after=end - 2, before=end) for n in NODES) / 2.0
    figures.append("Prometheus: sum(rate(weir_requests_total[2s])) at the load's end = %.0f/s; "
                   "the client counted %.0f/s" % (rate or 0, client))
    if not rate or not 0.6 * client <= rate <= 1.4 * client:
        raise Failed("Prometheus's fleet rate %s/s is not the client's %.0f/s" % (rate, client))


def phase_admin(f, figures):
    # what an operator's tooling does over the network: reads need nothing,
    # POSTs need the token
    url = "http://%s:%d/upstreams/app/127.0.0.1:9000?weight=default" % (f.addr("n1"), STATS_PORT)
    code, _ = f.http(url, method="POST")
    if code not in (401, 403):
        raise Failed("admin POST without the token answered %d" % code)
    code, body = f.http(url, method="POST", token=TOKEN)
    if code != 200:
        raise Failed("admin POST with the token answered %d: %s" % (code, body))
    figures.append("stats socket over the network: POST without token refused, with token 200")


def limit_decisions(f, node):
    m = f.metrics(node)
    out = {r: m.get(("weir_rate_limit_decisions_total",
                     frozenset([("limit", '"fleet"'), ("result", '"%s"' % r)])), 0)
           for r in ("allowed", "rejected")}
    for r in ("ok", "failed"):
        out["sync_" + r] = m.get(("weir_rate_limit_redis_syncs_total",
                                  frozenset([("result", '"%s"' % r)])), 0)
    return out


def phase_cluster_limit(f, figures):
    """One key sent from several clients to all three nodes, through ECMP
    and then through HAProxy: together they admit what one limit allows,
    not three times it."""
    for n in NODES:
        if f.scope == "cluster":
            wait_until(lambda: f.metrics(n).get(("weir_rate_limit_redis_up", frozenset())) == 1,
                       10, "%s connected to redis" % n)
    # a key of its own per balancer: each run starts from a key at rest
    cluster_limit_run(f, figures, "ECMP", VIP, PORT, "ecmp", 3.0)
    cluster_limit_run(f, figures, "HAProxy", LB_CLIENT_ADDR, HAPROXY_PORT, "haproxy", 2.0)


def cluster_limit_run(f, figures, via, host, port, key, seconds):
    def fail(msg):
        raise Failed("cluster limit via %s: %s" % (via, msg))

    before = {n: limit_decisions(f, n) for n in NODES}
    origin_before = {n: f.origin_count(n, LIMIT_PATH) for n in NODES}
    load = f.load_start("limit-" + key, host, port, hold=(),
                        extra=["--path", LIMIT_PATH, "--header", "X-Fleet-Key: " + key,
                               "--allow-429", "--sources", ",".join(CLIENT_SOURCES)])
    time.sleep(seconds)
    r = f.load_stop(load)
    if r["failed"]:
        fail("%d failed requests, e.g. %s" % (r["failed"], r["failures"][:5]))
    t = r["end"] - r["start"]
    # every node's counters, and what reached every node's origin
    time.sleep(0.2)
    after = {n: limit_decisions(f, n) for n in NODES}
    allowed = {n: after[n]["allowed"] - before[n]["allowed"] for n in NODES}
    rejected = sum(after[n]["rejected"] - before[n]["rejected"] for n in NODES)
    at_origin = {n: f.origin_count(n, LIMIT_PATH) - origin_before[n] for n in NODES}
    total = sum(allowed.values())
    one = LIMIT_BURST + LIMIT_RATE * t            # one limit over t
    # each node learns the others' admissions one interval late at most:
    # one interval's worth of the limit per node on top (docs/config.md)
    bound = one + len(NODES) * LIMIT_RATE * LIMIT_INTERVAL
    local = len(NODES) * one                      # three independent limits
    figures.append("cluster limit via %s (scope %s, %d/s burst %d, redis every %d ms): %.1f s of %d "
                   "requests from %d clients, %d admitted (nodes %s; origins %s; "
                   "client %d), %d refused; bound burst + rate x t + interval = %.0f, "
                   "three local limits %.0f"
                   % (via, f.scope, LIMIT_RATE, LIMIT_BURST, LIMIT_INTERVAL * 1000, t,
                      r["ok"] + r["limited"], len(r["clients"]), total,
                      "+".join("%d" % allowed[n] for n in NODES),
                      "+".join("%d" % at_origin[n] for n in NODES), r["ok"], rejected, bound, local))
    if sorted(r["clients"]) != sorted(CLIENT_SOURCES):
        fail("weir saw clients %s, not %s" % (r["clients"], CLIENT_SOURCES))
    if total != sum(at_origin.values()) or total != r["ok"]:
        fail("nodes admitted %d, origins answered %d, client got %d"
             % (total, sum(at_origin.values()), r["ok"]))
    if rejected != r["limited"]:
        fail("nodes refused %d, client got %d 429s" % (rejected, r["limited"]))
    for n in NODES:
        # every node saw the key, and limited it: the load reached all three
        if allowed[n] < 1 or after[n]["rejected"] - before[n]["rejected"] < 10:
            fail("%s admitted %d, refused %d: the key did not reach every node"
                 % (n, allowed[n], after[n]["rejected"] - before[n]["rejected"]))
    if f.scope == "cluster":
        for n in NODES:
            # the node reconciled with redis (a sync is sent for an
            # interval in which the node admitted some), never failing
            ok = after[n]["sync_ok"] - before[n]["sync_ok"]
            bad = after[n]["sync_failed"] - before[n]["sync_failed"]
            if bad or ok < 3:
                fail("%s synced with redis %d times ok, %d failed in %.1f s" % (n, ok, bad, t))
    if total > bound:
        fail("%d admitted over the fleet, more than %.0f (burst + rate x t + one interval "
             "per node): the nodes limit alone" % (total, bound))
    if total > 0.5 * local:
        fail("%d admitted, not clearly below three local limits' %.0f" % (total, local))
    if total < 0.8 * one:
        fail("only %d admitted, under 80%% of the limit's %.0f" % (total, one))


def phase_rollout(f, figures):
    # a broken config is stopped by weir -t before any node is touched
    bad = os.path.join(f.tmp, "bad.conf")
    with open(bad, "w") as fh:
        fh.write(f.node_config("n1", v2=True).replace('upstream = "v2"', 'upstream = "v3"'))
    p = run([f.weir, "-t", "-c", bad], check=False)
    if p.returncode == 0 or (bad + ":") not in p.stderr + p.stdout:
        raise Failed("weir -t accepted a route to an undefined upstream: %s" % p.stderr)

    load = f.load_start("rollout", VIP, PORT)
    t0 = time.time()
    done = []
    for n in NODES:
        conf = os.path.join(f.node_dir(n), "weir.conf")
        new = conf + ".new"
        with open(new, "w") as fh:
            fh.write(f.node_config(n, v2=True))
        run([f.weir, "-t", "-c", new], ns=f.ns_node[n])
        before = f.metrics(n)
        os.rename(new, conf)
        os.kill(f.weirs[n].pid, signal.SIGHUP)
        ok = frozenset([("result", '"ok"')])
        wait_until(lambda: f.metrics(n).get(("weir_reloads_total", ok), 0)
                   > before.get(("weir_reloads_total", ok), 0), 15, "%s reloaded" % n)
        # the new route answers on this node (its own address, not the VIP)
        got = origin_of(*f.http("http://%s:%d/echo/v2" % (f.addr(n), PORT)))
        if got != n + "-v2":
            raise Failed("%s: /echo/v2 after the reload: %s" % (n, got))
        for m in NODES:
            if m not in done and m != n:
                got = origin_of(*f.http("http://%s:%d/echo/v2" % (f.addr(m), PORT)))
                if got != m:
                    raise Failed("%s before its turn: /echo/v2: %s" % (m, got))
        done.append(n)
        time.sleep(0.5)
    r = f.load_stop(load)
    check_load(r, "rollout n1, n2, n3 under ECMP load", figures)
    figures.append("rollout: %.1f s for three nodes (weir -t, HUP, /echo/v2 answers, next)"
                   % (r["end"] - t0))


def phase_ecmp_drain(f, figures, pinned=True):
    node = "n3"
    load = f.load_start("ecmp-drain", VIP, PORT)
    time.sleep(1.5)
    t_route = time.time()
    # 1. out of the balancer: no new connection goes to n3; the ones it
    #    has stay pinned to it
    f.set_ecmp([n for n in NODES if n != node])
    # 2. drain it: weir answers each kept-alive connection's next request
    #    with Connection: close and exits when they are done
    time.sleep(0.3)
    t_quit = time.time()
    f.quit_weir(node)
    t_exit = time.time()
    time.sleep(1.0)
    r = f.load_stop(load)
    late = served(r, node, after=t_route + 0.05)
    figures.append("ECMP drain of %s (%s): nexthop removed, QUIT after %.1f s, exited %.1f s "
                   "after QUIT; %s answered %d requests after its route was gone"
                   % (node, "pinned" if pinned else "UNPINNED", t_quit - t_route,
                      t_exit - t_quit, node, late))
    if pinned:
        check_load(r, "ECMP drain", figures)
        # the held connection kept going to n3 after its route was gone
        # (pinned), until weir's drain closed it
        if late < 1 or r["closes_by_server"] < 1:
            raise Failed("ECMP drain: %s answered %d after its route went, %d drain closes: "
                         "no connection was established to it" % (node, late,
                                                                  r["closes_by_server"]))
    else:
        figures.append("ECMP drain without pinning: %d requests, %d FAILED (expected), e.g. %s"
                       % (r["ok"] + r["failed"], r["failed"],
                          sorted(set(x["error"] for x in r["failures"]))[:3]))
    # back in service for the next phase: start, check, then route
    f.start_weir(node)
    f.set_ecmp(list(NODES))


def phase_haproxy_drain(f, figures):
    node = "n2"
    # n3 came back after the ECMP drain: HAProxy's checks must see it up
    # again (rise 2, 500 ms apart) before it gets connections
    wait_until(lambda: all(f.haproxy_stat(n)["status"] == "UP" for n in NODES), 10,
               "haproxy sees all nodes UP")
    load = f.load_start("haproxy", LB_CLIENT_ADDR, HAPROXY_PORT)
    time.sleep(1.5)
    t_drain = time.time()
    out = f.haproxy_cmd("set server be/%s state drain" % node).strip()
    if out:
        raise Failed("haproxy: set server state drain: %s" % out)
    wait_until(lambda: f.haproxy_stat(node)["status"] == "DRAIN", 5, "haproxy shows DRAIN")
    stot = int(f.haproxy_stat(node)["stot"])
    time.sleep(0.5)
    if int(f.haproxy_stat(node)["stot"]) != stot:
        raise Failed("haproxy still sends new connections to a drained server")
    t_quit = time.time()
    f.quit_weir(node)
    t_exit = time.time()
    scur = int(f.haproxy_stat(node)["scur"])
    time.sleep(1.0)
    r = f.load_stop(load)
    check_load(r, "HAProxy drain", figures)
    want = CLIENT_ADDR if PROXY_PROTOCOL else LB_ADDR
    if r["clients"] != [want]:
        raise Failed("HAProxy: weir saw clients %s, not %s" % (r["clients"], want))
    figures.append("HAProxy (PROXY protocol %s): weir saw the client as %s"
                   % ("on" if PROXY_PROTOCOL else "off", ", ".join(r["clients"])))
    if served(r, node, after=t_drain + 0.05) < 1 or r["closes_by_server"] < 1:
        raise Failed("HAProxy drain: no connection of %s's was still going after DRAIN" % node)
    for n in NODES:
        if served(r, n, before=t_drain) < 10:
            raise Failed("HAProxy: %s answered too little before the drain" % n)
    figures.append("HAProxy drain of %s: DRAIN, no new connection in 0.5 s, QUIT, exited %.1f s "
                   "after QUIT, %d sessions left on it; it answered %d requests after DRAIN"
                   % (node, t_exit - t_quit, scur, served(r, node, after=t_drain)))
    # back in service: start it, check it, then let HAProxy send to it
    f.start_weir(node)
    f.haproxy_cmd("set server be/%s state ready" % node)


def remove_stale_namespaces():
    """Namespaces a killed run (SIGKILL skips the finally) left behind."""
    netns.remove_stale("wf", r"lb|cl|fab|n\d", log=log)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weir", default=os.path.join(ROOT, "build", "weir"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--scope", choices=("cluster", "local"), default="cluster",
                    help="the limit's scope in phase 6 (local: shows that phase failing)")
    ap.add_argument("--unpinned", action="store_true",
                    help="also drain an ECMP node without conntrack pinning (shows failures)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("fleet: needs root (network namespaces)", file=sys.stderr)
        return 2
    for tool in ("ip", "nft", "haproxy", "prometheus", "promtool", "curl", "redis-server",
                 "redis-cli"):
        if shutil.which(tool) is None:
            print("fleet: %s is missing (tests/install-deps fleet installs it)" % tool,
                  file=sys.stderr)
            return 2
    if not os.access(a.weir, os.X_OK):
        print("fleet: %s missing: run make" % a.weir, file=sys.stderr)
        return 2
    # a stop from outside still runs the clean-up below
    def on_signal(sig, frame):
        raise KeyboardInterrupt("signal %d" % sig)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    remove_stale_namespaces()
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="weir-fleet.")
    f = Fleet(a.weir, tmp)
    f.scope = a.scope
    figures = []
    ok = False
    try:
        f.build_network()
        f.pin(True)
        f.start_redis()
        for n in NODES:
            f.start_origins(n)
        for n in NODES:
            f.wait_origins(n)
            f.start_weir(n)
        f.start_prometheus()
        f.start_haproxy()
        log("set up in %.1f s (%s)" % (time.monotonic() - t0, tmp))
        for name, phase in (("ECMP spread", phase_ecmp_spread), ("Prometheus", phase_prometheus),
                            ("admin over the network", phase_admin),
                            ("cluster rate limit", phase_cluster_limit),
                            ("rollout", phase_rollout), ("ECMP drain", phase_ecmp_drain),
                            ("HAProxy drain", phase_haproxy_drain)):
            t = time.monotonic()
            phase(f, figures)
            log("ok   %s (%.1f s)" % (name, time.monotonic() - t))
        if a.unpinned:
            f.pin(False)
            phase_ecmp_drain(f, figures, pinned=False)
            log("done ECMP drain without pinning")
        ok = True
    except (Failed, netns.NetnsError) as e:
        log("FAIL %s" % e)
    except KeyboardInterrupt as e:
        log("FAIL interrupted (%s)" % (e or "SIGINT"))
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # the clean-up runs to its end
        f.teardown()
        for line in figures:
            log("  " + line)
        log("%s in %.1f s" % ("passed" if ok else "FAILED", time.monotonic() - t0))
        if ok and not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log("work directory kept: %s" % tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
