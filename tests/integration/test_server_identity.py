"""Per-server state follows a server's identity (group name and address),
not its place in the route table: a request in flight on an older table
keeps reaching servers of its own group after a reload reorders, adds or
removes servers, a pooled connection to a server that stays is reused
across the reload, and reload churn gives every current route and server a
series of its own (no "(other)") with counters that start at zero.

A draining worker serves a request whose head was still arriving at the
HUP, on the new table: that is how these tests put an old and a new table
in one worker."""

import os
import signal
import socket
import time

from harness import Client, render_config, slack, unread_by_server, wait_until


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def reloads(w):
    return w.metrics()("weir_reloads_total", result="ok")


def hup_counted(w, before, timeout=5.0):
    w.signal(signal.SIGHUP)
    wait_until(lambda: reloads(w) > before, slack(timeout), interval=0.005,
               what="reload %d counted" % (before + 1))


class HangingPort:
    """A port whose connects hang: a listener with a full accept queue
    (backlog 0 and one connection never accepted) drops every SYN."""

    def __init__(self):
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(0)
        self.port = self.ls.getsockname()[1]
        self.fill = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.settimeout(0.3)
        try:
            probe.connect(("127.0.0.1", self.port))
            hangs = False
        except socket.timeout:
            hangs = True
        finally:
            probe.close()
        assert hangs, "a connect to a full accept queue did not hang here"

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def close(self):
        self.fill.close()
        self.ls.close()


def partial_head(w, target):
    """A client connection to weir with all of a request head but its last
    CRLF: weir is reading it, so a drain does not close it."""
    c = Client(w.port, timeout=10)
    c.send("GET %s HTTP/1.1\r\nHost: localhost\r\n" % target)
    # read by a worker, not still in the accept queue, where a reload
    # would leave it for the new workers
    wait_until(lambda: unread_by_server(w.port, c.sock) == 0, slack(5), interval=0.001,
               what="the head read by a worker")
    return c


def assert_own_groups(groups):
    """Every request each origin logged has the path prefix of its group."""
    for prefix, origins in groups.items():
        for o in origins:
            for e in o.requests():
                assert e["target"].startswith(prefix), (o.name, e["target"])


def test_a_request_in_flight_across_a_reordering_reload_stays_in_its_group(weir_factory, origin_factory):
    """T1: a = [hang, a2], b = [b1]; T2 puts b first, adds b0 before b1 and
    drops hang. A request on T1 waits on hang's connect; after the HUP the
    same worker serves two /b/ requests on T2 (b0, then b1, both pooled);
    then the connect times out and the request moves on in T1 to a2. By
    index, T1's a2 is T2's b1, whose pool holds a connection: it must still
    go to a2."""
    hang = HangingPort()
    a2, b0, b1 = origin_factory("a2"), origin_factory("b0"), origin_factory("b1")
    try:
        kw = dict(workers=1, timeouts={"upstream_connect": "2s", "client_header": "20s",
                                       "drain": "20s"},
                  routes=[{"path": "/a/", "upstream": "a"}, {"path": "/b/", "upstream": "b"}])
        w = weir_factory(upstreams=[{"name": "a", "servers": [hang.addr, a2.addr]},
                                    {"name": "b", "servers": [b1.addr]}], **kw)
        t2 = render_config(w.dir, w.port, w.stats_port,
                           upstreams=[{"name": "b", "servers": [b0.addr, b1.addr]},
                                      {"name": "a", "servers": [a2.addr]}], **kw)
        m0 = w.metrics()
        c1, c2 = partial_head(w, "/b/one"), partial_head(w, "/b/two")
        r = Client(w.port, timeout=15)
        r.send("GET /a/in-flight HTTP/1.1\r\nHost: localhost\r\n\r\n")
        time.sleep(slack(0.3))  # it picked hang (first in smooth WRR) and waits
        write_atomic(w.conf, t2)
        hup_counted(w, m0("weir_reloads_total", result="ok"))
        # the old worker, on T2 now: b0, then b1, each pooled after
        c1.send("\r\n")
        r1 = c1.read_response()
        c2.send("\r\n")
        r2 = c2.read_response()
        assert (r1.status, r1.get("X-Origin")) == (200, "b0"), r1
        assert (r2.status, r2.get("X-Origin")) == (200, "b1"), r2
        # hang's connect times out; the request goes on, in T1, to a2
        rr = r.read_response(timeout=10)
        assert rr.status == 200, rr
        assert rr.get("X-Origin") == "a2", rr
        assert [e["target"] for e in a2.requests()] == ["/a/in-flight"]
        assert_own_groups({"/a/": [a2], "/b/": [b0, b1]})
        for c in (c1, c2, r):
            c.close()
    finally:
        hang.close()


def test_a_pooled_connection_to_a_server_that_stays_is_reused_after_a_reload(weir_factory, origin_factory):
    """A reload that reorders the groups and adds a server keeps the pool
    of a server it keeps: the old worker's next request to it reuses the
    connection (same origin connection, counted as a reuse)."""
    a, b, extra = origin_factory("a"), origin_factory("b"), origin_factory("extra")
    kw = dict(workers=1, timeouts={"client_header": "20s", "drain": "20s"},
              routes=[{"path": "/a/", "upstream": "a"}, {"path": "/b/", "upstream": "b"}])
    w = weir_factory(upstreams=[{"name": "a", "servers": [a.addr]}, {"name": "b", "servers": [b.addr]}], **kw)
    t2 = render_config(w.dir, w.port, w.stats_port,
                       upstreams=[{"name": "b", "servers": [b.addr]},
                                  {"name": "a", "servers": [extra.addr, a.addr]}], **kw)
    with w.client() as c:
        assert c.request("GET", "/b/echo/first").status == 200
    first = b.requests()[-1]["conn"]
    m0 = w.metrics()
    c2 = partial_head(w, "/b/echo/second")
    write_atomic(w.conf, t2)
    hup_counted(w, m0("weir_reloads_total", result="ok"))
    c2.send("\r\n")
    r = c2.read_response()
    assert r.status == 200 and r.get("X-Origin") == "b", r
    assert b.requests()[-1]["target"] == "/b/echo/second"
    assert b.requests()[-1]["conn"] == first, "a new connection to an unchanged server after the reload"
    m1 = w.metrics()
    assert m1("weir_upstream_reuses_total") - m0("weir_upstream_reuses_total") == 1
    assert m1("weir_upstream_server_reuses_total", upstream="b", server=b.addr) - m0(
        "weir_upstream_server_reuses_total", upstream="b", server=b.addr) == 1
    c2.close()
    assert_own_groups({"/a/": [a, extra], "/b/": [b]})


def test_a_request_in_flight_to_a_server_a_reload_removed_finishes_and_is_not_pooled(weir_factory,
                                                                                      origin_factory):
    """T1: a = [a1]; T2: a = [a2]. A slow request on a1 finishes after the
    worker met T2: it is answered, and its connection is closed (a1 has
    no pool in T2), while a2's pooled connection is reused."""
    from harness import established_to
    a1, a2 = origin_factory("a1"), origin_factory("a2")
    kw = dict(workers=1, timeouts={"client_header": "20s", "drain": "20s", "upstream_read": "5s"},
              routes=[{"path": "/", "upstream": "a"}])
    w = weir_factory(upstreams=[{"name": "a", "servers": [a1.addr]}], **kw)
    t2 = render_config(w.dir, w.port, w.stats_port, upstreams=[{"name": "a", "servers": [a2.addr]}], **kw)
    m0 = w.metrics()
    c2, c3 = partial_head(w, "/two"), partial_head(w, "/three")
    r = Client(w.port, timeout=15)
    r.send("GET /slow/1500 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    time.sleep(slack(0.2))
    write_atomic(w.conf, t2)
    hup_counted(w, m0("weir_reloads_total", result="ok"))
    c2.send("\r\n")
    r2 = c2.read_response()
    assert (r2.status, r2.get("X-Origin")) == (200, "a2"), r2
    rr = r.read_response(timeout=10)
    assert (rr.status, rr.get("X-Origin")) == (200, "a1"), rr
    # c3 keeps the draining worker alive: a1's connection is gone, a2's pooled
    wait_until(lambda: established_to(a1.port) == 0, slack(2), what="a1's connection closed")
    assert established_to(a2.port) == 1
    m1 = w.metrics()
    c3.send("\r\n")
    r3 = c3.read_response()
    assert (r3.status, r3.get("X-Origin")) == (200, "a2"), r3
    assert w.metrics()("weir_upstream_reuses_total") - m1("weir_upstream_reuses_total") == 1
    assert [e["target"] for e in a1.requests()] == ["/slow/1500"]
    for c in (c2, c3, r):
        c.close()


def churn_config(w, origin, n, per=8):
    """Route "/" to the origin (group "stay"), and a route "/gN/" to group
    "churn" of <per> refusing servers, new addresses at every N. They are
    on 127.77.0.0/16, where no test listens: on 127.0.0.1 a port of this
    range could be another test's listener when the suites run side by
    side (a 404 from a stats listener came back instead of the 502)."""
    def addr(k):
        return "127.77.%d.%d:9" % (k // 250, k % 250 + 1)
    return render_config(
        w.dir, w.port, w.stats_port, workers=1,
        upstreams=[{"name": "stay", "servers": [origin.addr]},
                   {"name": "churn", "servers": [addr(n * per + i) for i in range(per)],
                    }],
        routes=[{"path": "/g%d/" % n, "upstream": "churn"}, {"path": "/", "upstream": "stay"}],
        timeouts={"upstream_connect": "1s"})


def test_three_hundred_reloads_of_new_routes_and_servers_keep_every_series_distinct(weir_factory, origin):
    """Each reload drops the previous churn route and its 8 servers and
    adds new ones: 301 route keys and 2,408 server keys over the run, more
    than the key table holds, so keys of what left are reclaimed. Every
    current route and server has a series of its own, a new one starts at
    zero, and the route that stays counts on."""
    w = weir_factory(start=False, upstreams=[{"name": "stay", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "stay"}], workers=1)
    write_atomic(w.conf, churn_config(w, origin, 0))
    w.start()
    sent_stay = 0
    deadline = time.monotonic() + slack(120)
    for n in range(0, 301):
        if n:
            write_atomic(w.conf, churn_config(w, origin, n))
            hup_counted(w, n - 1 + 0)
        if n % 25 and n != 300:
            continue
        assert time.monotonic() < deadline, "reloads too slow on this machine"
        # one request to the churn route (refused: 502) and one to "/"
        assert w.get("/g%d/x" % n).status == 502
        assert w.get("/").status == 200
        sent_stay += 1
        m = w.metrics()
        assert "(other)" not in m.text, "series merged into (other) after %d reloads" % n
        churn = [(dict(l)["server"], v) for (name, l), v in m.samples.items()
                 if name == "weir_upstream_server_responses_total" and dict(l).get("upstream") == "churn"
                 and dict(l).get("class") == "5xx"]
        assert len(churn) == 8 and len({s for s, _ in churn}) == 8, churn
        # this generation's servers saw one request between them: a reused
        # index carrying another server's counts would show more
        assert sum(v for _, v in churn) == 1, (n, churn)
        assert m("weir_route_requests_total", host="*", path="/g%d/" % n) == 1, n
        assert m("weir_route_requests_total", host="*", path="/") == sent_stay, n
        assert m("weir_upstream_server_requests_total", upstream="stay", server=origin.addr) == sent_stay
