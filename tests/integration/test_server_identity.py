"""Reload churn gives every current route and server a series of its own
(no "(other)"), with counters that start at zero, while the route that
stays counts on."""

import os
import signal
import time

from harness import render_config, slack, wait_until


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


def churn_config(w, origin, n, per=8):
    """Route "/" to the origin (group "stay"), and a route "/gN/" to group
    "churn" of <per> refusing servers, new addresses at every N."""
    base = 20000 + (n * per) % 40000
    return render_config(
        w.dir, w.port, w.stats_port, workers=1,
        upstreams=[{"name": "stay", "servers": [origin.addr]},
                   {"name": "churn", "servers": ["127.0.0.1:%d" % (base + i) for i in range(per)],
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
