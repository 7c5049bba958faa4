"""bed.py: the chaos suite's test bed: network namespaces joined by veth
pairs, and the weir, origins, relay and load clients that run in them.

Principle: everything made here is recorded where it is made (World.procs,
.mounts, .made), so World.down() can undo it all, whatever failed; names
carry the pid of the run, so two runs never touch each other's, and a run
that was killed is cleaned up by the next (remove_stale). chaos.py holds
the checks and the faults.
"""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "tests"))
from harness import SANITIZER_LINE, Metrics, children_of, proc_stat  # noqa: E402
import netns  # noqa: E402

PYTHON = "/usr/bin/python3"
ORIGIN_PY = os.path.join(REPO, "tests", "origin", "origin.py")
RELAY_PY = os.path.join(HERE, "relay.py")
LOAD_SRC = os.path.join(HERE, "load.c")
WEIR_BIN = os.path.abspath(os.environ.get("WEIR_BIN") or os.path.join(REPO, "build", "weir"))
ASAN = "asan" in WEIR_BIN or os.environ.get("WEIR_ASAN") == "1"
SLACK = 3.0 if ASAN else 1.0

TAG = "wch"
HOSTS = ("c", "w", "o1", "o2", "r")
# (host, address, host, address) per veth pair, /24 each
LINKS = (("c", "10.98.1.2", "w", "10.98.1.1"),
         ("w", "10.98.2.1", "o1", "10.98.2.2"),
         ("w", "10.98.3.1", "o2", "10.98.3.2"),
         ("w", "10.98.4.1", "r", "10.98.4.2"),
         ("r", "10.98.5.1", "o1", "10.98.5.2"))
WEIR_ADDR = "10.98.1.1:8080"
ORIGIN_A = "10.98.2.2"
PORT = 8080

def ns(host):
    return netns.name(TAG, host)


def sh(*args, check=True, timeout=20):
    r = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr.decode(errors="replace").strip()))
    return r.stdout.decode(errors="replace")


def in_ns(host, *args, **kw):
    return sh("ip", "netns", "exec", ns(host), *args, **kw)


# ---------------------------------------------------------------------------
# the world: namespaces, veths, and every process and mount we start
# ---------------------------------------------------------------------------

class World:
    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []   # Popen objects, each its own session
        self.mounts = []
        self.net = netns.Namespaces(TAG)
        self.ifname = {}  # (host, peer) -> interface name in host

    def up(self):
        for h in HOSTS:
            self.net.add(h)
        for i, (h1, a1, h2, a2) in enumerate(LINKS):
            # made in weir's namespace, so no name is ever seen outside ours
            n1, n2 = "v%d%s" % (i, h1), "v%d%s" % (i, h2)
            self.net.veth(ns("w"), n1, ns(h1), n2, ns(h2))
            for h, n, a in ((h1, n1, a1), (h2, n2, a2)):
                self.net.address(ns(h), n, a + "/24")
            self.ifname[(h1, h2)] = n1
            self.ifname[(h2, h1)] = n2
        for h in HOSTS:
            # a surge needs a deep accept queue in weir's namespace
            self.net.sysctl(ns(h), "net.core.somaxconn=65535", "net.ipv4.tcp_max_syn_backlog=65535",
                            "net.ipv4.ip_local_port_range=10000 65000")

    def spawn(self, host, argv, out, ready=False):
        """Starts <argv> in <host>'s namespace, in a session of its own;
        with <ready>, its stdout is kept for wait_ready()."""
        f = open(out, "ab")
        p = subprocess.Popen(["ip", "netns", "exec", ns(host)] + argv, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE if ready else f, stderr=f, start_new_session=True)
        p.out_path = out
        self.procs.append(p)
        return p

    def wait_ready(self, p, timeout=10.0):
        """Waits for the "ready" line of a process spawned with ready=True."""
        end = time.monotonic() + timeout
        line = b""
        while time.monotonic() < end and p.poll() is None:
            r, _, _ = select.select([p.stdout], [], [], 0.1)
            if r:
                line = p.stdout.readline()
                break
        if not line.startswith(b"ready"):
            raise RuntimeError("%s did not start: %r %s" % (p.args[3:6], line, open(p.out_path, "rb").read()[-800:]))

    def kill(self, p):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if p.stdout:
            p.stdout.close()
        if p in self.procs:
            self.procs.remove(p)

    def mount_tmpfs(self, path, size):
        os.makedirs(path, exist_ok=True)
        sh("mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "wchaos", path)
        self.mounts.append(path)

    def umount(self, path):
        sh("umount", "-l", path, check=False)
        if path in self.mounts:
            self.mounts.remove(path)

    def down(self):
        for p in list(self.procs):
            self.kill(p)
        for m in list(self.mounts):
            self.umount(m)
        self.net.remove_all()


def remove_stale():
    """Namespaces left by a run that was killed (SIGKILL skips cleanup)."""
    netns.remove_stale(TAG, "|".join(HOSTS), log=lambda m: print("chaos: " + m, flush=True))


# ---------------------------------------------------------------------------
# one fault's weir and origins
# ---------------------------------------------------------------------------

def weir_config(d, logdir, workers=2, extra_timeouts=None):
    t = {"client_header": "5s", "client_body": "5s", "client_keepalive": "10s",
         "upstream_connect": "1s", "upstream_read": "2s", "upstream_send": "2s",
         "upstream_keepalive": "500ms", "drain": "2s"}
    t.update(extra_timeouts or {})
    return """workers = %d;
log = { error = "%s/error.log"; access = "%s/access.log"; level = "info"; };
stats = { unix = "%s/stats.sock"; };
listeners = ( { address = "%s"; backlog = 16384; } );
upstreams = (
  { name = "a"; servers = ( { address = "%s:%d"; } ); },
  { name = "b"; servers = ( { address = "10.98.3.2:%d"; } ); },
  { name = "r"; servers = ( { address = "10.98.4.2:%d"; } ); }
);
routes = (
  { host = "a.chaos"; upstream = "a"; },
  { host = "r.chaos"; upstream = "r"; },
  { host = "b.chaos"; upstream = "b"; }
);
timeouts = { %s };
""" % (workers, logdir, logdir, d, WEIR_ADDR, ORIGIN_A, PORT, PORT, PORT,
       " ".join('%s = "%s";' % kv for kv in t.items()))


def unix_get(path, target="/metrics", timeout=3.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(b"GET " + target.encode() + b" HTTP/1.1\r\nHost: stats\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise AssertionError("stats answered %r" % head[:100])
    return body.decode()


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def cpu_ticks(pid):
    st = proc_stat(pid)
    return int(st[11]) + int(st[12]) if st else 0


class Bed:
    """weir (in "w"), origin A (in "o1"), origin B (in "o2"), maybe the relay."""

    def __init__(self, world, name, relay_args=None, logdir=None, workers=2, timeouts=None,
                 log_tmpfs=None, nofile=None):
        self.world = world
        self.weir = self.origin_a = self.origin_b = self.relay = None
        try:
            self.start(name, relay_args, logdir, workers, timeouts, log_tmpfs, nofile)
        except BaseException:
            self.stop()  # what did start must not hold the next fault's ports
            raise

    def start(self, name, relay_args, logdir, workers, timeouts, log_tmpfs, nofile):
        world = self.world
        self.started = time.monotonic()
        self.dir = os.path.join(world.tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        self.logdir = logdir or self.dir
        if log_tmpfs:
            world.mount_tmpfs(self.logdir, log_tmpfs)
        self.stats = os.path.join(self.dir, "stats.sock")
        self.conf = os.path.join(self.dir, "weir.conf")
        with open(self.conf, "w") as f:
            f.write(weir_config(self.dir, self.logdir, workers, timeouts))
        self.workers = workers
        self.origin_a = world.spawn("o1", [PYTHON, ORIGIN_PY, "--listen", "0.0.0.0:%d" % PORT,
                                           "--name", "A"], os.path.join(self.dir, "origin-a.out"), True)
        self.origin_b = world.spawn("o2", [PYTHON, ORIGIN_PY, "--listen", "0.0.0.0:%d" % PORT,
                                           "--name", "B"], os.path.join(self.dir, "origin-b.out"), True)
        self.relay_stats = os.path.join(self.dir, "relay.json")
        self.relay = world.spawn("r", [PYTHON, RELAY_PY, "--listen", "10.98.4.2:%d" % PORT,
                                       "--to", "10.98.5.2:%d" % PORT, "--stats", self.relay_stats]
                                 + list(relay_args or ()), os.path.join(self.dir, "relay.out"), True)
        # started together, waited for together: python start-up is slow here
        for p in (self.origin_a, self.origin_b, self.relay):
            world.wait_ready(p)
        env = dict(os.environ)
        if ASAN:
            env.setdefault("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1:halt_on_error=1")
        # prlimit execs weir: the pid stays weir's master
        limit = ["prlimit", "--nofile=%d:%d" % (nofile, nofile), "--"] if nofile else []
        self.weir = subprocess.Popen(["ip", "netns", "exec", ns("w")] + limit + [WEIR_BIN, "-c", self.conf],
                                     cwd=self.dir, stdin=subprocess.DEVNULL, env=env,
                                     stdout=open(os.path.join(self.dir, "weir.out"), "ab"),
                                     stderr=open(os.path.join(self.dir, "weir.err"), "ab"),
                                     start_new_session=True)
        world.procs.append(self.weir)
        end = time.monotonic() + 10 * SLACK
        while True:
            if self.weir.poll() is not None:
                raise RuntimeError("weir exited %s at start: %s" % (self.weir.returncode, self.logs()))
            try:
                m = self.metrics()
                if m("weir_workers_alive") == workers:
                    break
            except (OSError, AssertionError):
                pass
            if time.monotonic() > end:
                raise RuntimeError("weir not ready: %s" % self.logs())
            time.sleep(0.05)

    def logs(self):
        out = []
        for n in ("weir.err", "error.log"):
            p = os.path.join(self.logdir if n == "error.log" else self.dir, n)
            try:
                out.append(open(p, "rb").read()[-1500:].decode(errors="replace"))
            except OSError:
                pass
        return "\n".join(out)

    def metrics(self):
        return Metrics(unix_get(self.stats))

    def worker_pids(self):
        return children_of(self.weir.pid)

    def warm_up(self):
        """A few requests on every route, then idle: what weir allocates once
        (BoringSSL's lazy state, the slab's first chunks) is in the baseline,
        and the pooled upstream connections have expired."""
        ls = [self.load(h, "/", conns=1, seconds=0.2, tag="warm-" + h[0])
              for h in ("a.chaos", "b.chaos", "r.chaos")]
        for p in ls:
            load_result(p)
        end = time.monotonic() + 10 * SLACK
        t0 = time.monotonic()
        while time.monotonic() < end:
            m = self.metrics()
            if (time.monotonic() - t0 > 1.1 and m("weir_upstream_connections_active") == 0
                    and m("weir_client_connections_active") == 0):
                return
            time.sleep(0.1)
        raise RuntimeError("weir not idle after the warm-up")

    def snapshot(self):
        self.warm_up()
        pids = self.worker_pids()
        return {"metrics": self.metrics(), "pids": pids,
                "fds": {p: fd_count(p) for p in pids}, "t": time.monotonic()}

    def load(self, host, path="/", conns=4, seconds=3.0, timeout_ms=5000, keepalive=True,
             surge=0, tag=None, abort_pct=0, body=0):
        args = [self.world.load_bin, "-a", WEIR_ADDR, "-H", host, "-p", path, "-c", str(conns),
                "-d", str(seconds), "-t", str(int(timeout_ms * SLACK))]
        if not keepalive:
            args.append("-n")
        if surge:
            args += ["-s", str(surge)]
        if abort_pct:
            args += ["-R", str(abort_pct)]
        if body:
            args += ["-b", str(body)]
        # the client's stdout (its JSON) and stderr both go to this file
        p = self.world.spawn("c", args, os.path.join(self.dir, "load-%s.out" % (tag or host)))
        p.tag, p.bound = tag or host, seconds + timeout_ms * SLACK / 1000.0 + 10
        return p

    def stop(self, chk=None):
        """Stops everything of this bed: weir with TERM (it must exit 0),
        the rest with KILL. With <chk>, a bad exit and any sanitizer report
        in weir's output or error log fail it."""
        rc = None
        if self.weir is not None and self.weir.poll() is None:
            try:
                os.kill(self.weir.pid, signal.SIGTERM)
                rc = self.weir.wait(5 * SLACK)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        for p in (self.weir, self.origin_a, self.origin_b, self.relay):
            if p is not None:
                self.world.kill(p)
        if chk is not None:
            chk.expect(rc == 0, "weir did not exit 0 on TERM: %s" % rc)
            reports = []
            for path in (os.path.join(self.dir, "weir.err"), os.path.join(self.logdir, "error.log")):
                try:
                    with open(path, "rb") as f:
                        reports += [l for l in f.read().decode(errors="replace").splitlines()
                                    if SANITIZER_LINE.search(l)]
                except OSError:
                    pass
            chk.expect(not reports, "sanitizer reports: %s" % reports[:5])


def load_result(p):
    """Waits (bounded) for a load process and returns its JSON."""
    try:
        p.wait(p.bound)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(5)
        raise AssertionError("load client %s overran its bound" % p.tag)
    text = open(p.out_path, "rb").read().decode(errors="replace")
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            r = json.loads(line)
            r["tag"] = p.tag
            return r
    raise AssertionError("load client %s printed no result: %r" % (p.tag, text[-500:]))


def client_failures(r):
    return r["failed"] + r["classes"]["1xx"] + r["classes"]["3xx"] + r["classes"]["4xx"] + r["classes"]["5xx"]
