"""Many idle clients: one worker holds 10,000 idle keep-alive connections
with at most 512 bytes of its memory each, and 64 active connections still
get every answer meanwhile (issue 16 item 4, the short form; the 100,000
form with nginx and HAProxy beside it is tests/bench/conns.py, make
conns100k).

Each idle client sends one request, reads the whole answer and stays
connected, bound to a source address of its own in 127.3.0.0/16 so the
ephemeral ports of 127.0.0.1, which the rest of the suite uses, are not
touched. The memory is the worker's Pss of anonymous pages (its share
of the heap and slab pages it touches; pss_kb) and the slab gauge weir_slab_bytes_in_use, before and after; the
sanitizer build, whose shadow memory and redzones are no production
figure, checks the slab gauge only."""

import resource
import selectors
import socket
import time

import pytest

from harness import ASAN, established_to, fetch_metrics, simple, slack, wait_until

N = 10000
ACTIVE = 64
PER_ACTIVE = 20  # requests on each active connection
BATCH = 200      # requests in flight at once while the crowd opens
BOUND = 512      # bytes of worker memory per idle connection, at most
IP_BIND_ADDRESS_NO_PORT = 24
REQ = b"GET / HTTP/1.1\r\nHost: crowd\r\n\r\n"
ANSWER_END = b"hello from origin\n"


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip("open files hard limit %d < %d" % (hard, need))
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def pss_kb(pid):
    """The worker's share of its anonymous pages: what connections take.
    Not the whole Pss, whose file part (the shared libraries) grows when
    another process that mapped them exits, as the suite's other tests'
    do while this one counts: a run under -n 3 once read 519 bytes per
    connection where this test alone reads 471-487."""
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss_Anon:"):
                return int(line.split()[1])
    raise AssertionError("no Pss_Anon for %d" % pid)


def settled_slab(port):
    """weir_slab_bytes_in_use once it holds still: workers publish it with
    their 1 s tick, so a read right after the crowd opened may still show
    the buffers of its last requests in flight."""
    prev = None
    for _ in range(10):
        v = fetch_metrics(port)("weir_slab_bytes_in_use")
        if v == prev:
            return v
        prev = v
        time.sleep(1.1)
    raise AssertionError("weir_slab_bytes_in_use does not settle: %s" % prev)


def open_idle(port, n, first=0, timeout=60):
    """<n> connections, each with one request answered; at most BATCH in
    flight at once. Returns the open sockets (all of them, or it fails)."""
    idle, i = [], 0
    sel = selectors.DefaultSelector()
    pending = {}
    deadline = time.monotonic() + slack(timeout)
    while len(idle) < n:
        while i < n and len(pending) < BATCH:
            s = socket.socket()
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            k = first + i
            s.bind(("127.3.%d.%d" % (k // 250 % 250, 1 + k % 250), 0))
            s.connect_ex(("127.0.0.1", port))
            sel.register(s, selectors.EVENT_WRITE)
            pending[s] = b""
            i += 1
        assert time.monotonic() < deadline, "%d of %d idle clients after %.0fs" % (len(idle), n, slack(timeout))
        for key, ev in sel.select(timeout=1):
            s = key.fileobj
            if ev & selectors.EVENT_WRITE:
                s.send(REQ)
                sel.modify(s, selectors.EVENT_READ)
                continue
            data = s.recv(4096)
            assert data, "an opening client was closed: %r" % pending[s][:200]
            pending[s] += data
            if pending[s].endswith(ANSWER_END):
                assert pending[s].startswith(b"HTTP/1.1 200 "), pending[s][:200]
                sel.unregister(s)
                del pending[s]
                idle.append(s)
    sel.close()
    return idle


def active_round(port):
    """ACTIVE keep-alive connections doing PER_ACTIVE requests each, one in
    flight per connection; returns how many answers were 200."""
    sel = selectors.DefaultSelector()
    left = {}
    for _ in range(ACTIVE):
        s = socket.create_connection(("127.0.0.1", port), timeout=slack(5))
        s.setblocking(False)
        s.send(REQ)
        sel.register(s, selectors.EVENT_READ)
        left[s] = [PER_ACTIVE, b""]
    ok = 0
    deadline = time.monotonic() + slack(20)
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            data = s.recv(4096)
            st = left[s]
            if not data:
                sel.unregister(s)
                s.close()
                del left[s]
                continue
            st[1] += data
            if st[1].endswith(ANSWER_END):
                ok += st[1].startswith(b"HTTP/1.1 200 ")
                st[0] -= 1
                st[1] = b""
                if st[0] == 0:
                    sel.unregister(s)
                    s.close()
                    del left[s]
                else:
                    s.send(REQ)
    for s in left:
        s.close()
    sel.close()
    return ok


def closed_by_peer(socks):
    """Sockets among <socks> the server closed (readable while idle)."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    gone = [k.fileobj for k, _ in sel.select(timeout=0)]
    sel.close()
    return gone


def test_a_worker_holds_10000_idle_clients_in_512_bytes_each_and_serves_64_more(weir_factory, origin):
    raise_nofile(N + 1000)
    w = simple(weir_factory, origin, workers=1, limits={"connections": N + 1000},
               timeouts={"client_keepalive": "5m", "client_header": "30s"})
    worker = w.wait_workers(1)[0]
    crowd = []
    try:
        # the same opening once, closed: the buffers BATCH requests in
        # flight take are kept for reuse by the slab; the bound is on what
        # an idle connection holds
        for s in open_idle(w.port, 1000, first=N):
            s.close()
        wait_until(lambda: fetch_metrics(w.stats_port)("weir_client_connections_active") == 0,
                   slack(10), what="the warm-up clients closed")
        slab0 = settled_slab(w.stats_port)
        pss0 = pss_kb(worker)

        crowd = open_idle(w.port, N)
        slab1 = settled_slab(w.stats_port)
        m = fetch_metrics(w.stats_port)
        pss1 = pss_kb(worker)
        assert m("weir_client_connections_active") >= N
        assert established_to(w.port) >= N
        per_pss = (pss1 - pss0) * 1024 / N
        per_slab = (slab1 - slab0) / N
        print("per idle client: Pss %.0f bytes, slab %.0f bytes (%s)" % (per_pss, per_slab,
                                                                       "asan" if ASAN else "normal"))
        assert per_slab <= BOUND, "slab: %.0f bytes per idle connection" % per_slab
        if not ASAN:
            assert per_pss <= BOUND, "worker Pss: %.0f bytes per idle connection" % per_pss

        # the crowd costs the active clients no answer
        assert active_round(w.port) == ACTIVE * PER_ACTIVE
        assert closed_by_peer(crowd) == [], "weir closed idle clients it should hold"
        assert m.error("connection_limit") == 0
    finally:
        for s in crowd:
            s.close()
    wait_until(lambda: fetch_metrics(w.stats_port)("weir_client_connections_active") == 0,
               slack(20), what="every client closed")

