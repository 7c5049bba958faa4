"""Mirroring (docs/config.md, "Mirroring"): a share of a route's bodiless
requests copied to a shadow group whose answers are thrown away; a
stalled or dead shadow never delays or fails the real answer; the copies
in flight are bounded per worker; sent / failed / dropped are counted."""

import hashlib
import os
import time

import pytest

from harness import chunked, closed_port, get, header_values, render_config, slack, wait_until
from test_rate_limit import one
from test_split import check


def start(weir_factory, real_addr, shadow_addr, percent=100, max_in_flight=None, shadow_raw=""):
    w = weir_factory(start=False, upstreams=[{"name": "x", "servers": [real_addr]}],
                     routes=[{"path": "/", "upstream": "x"}])
    cap = "max_in_flight = %d; " % max_in_flight if max_in_flight else ""
    text = render_config(w.dir, w.port, w.stats_port,
                         [{"name": "app", "servers": [real_addr], "keepalive": 16},
                          {"name": "shadow", "servers": [shadow_addr], "raw": shadow_raw}],
                         [{"path": "/", "upstream": "app",
                           "extra": 'mirror = { upstream = "shadow"; percent = %d; %s};' % (percent, cap)}],
                         timeouts={"client_keepalive": "60s", "drain": "5s"})
    w.write_raw_config(text)
    w.start()
    w.wait_workers()
    return w


def mirrored(w, result):
    return w.metrics()("weir_route_mirror_requests_total", host="*", path="/", upstream="shadow", result=result)


def test_the_shadow_sees_a_copy_of_every_request_and_its_answers_are_dropped(weir_factory, origin_factory):
    real, shadow = origin_factory("real"), origin_factory("shadow")
    w = start(weir_factory, real.addr, shadow.addr)
    for i in range(40):
        status, hdrs, body = one(w.port, "/echo/%d?q=1" % i, [("X-Trace", "t%d" % i)])
        assert status == 200 and hdrs["x-origin"] == "real", (status, hdrs)
    wait_until(lambda: mirrored(w, "sent") == 40, slack(5), what="40 copies answered")
    copies = sorted(shadow.requests(), key=lambda e: int(e["target"].split("/")[2].split("?")[0]))
    assert [e["target"] for e in copies] == ["/echo/%d?q=1" % i for i in range(40)]
    assert [header_values(e, "X-Trace") for e in copies] == [["t%d" % i] for i in range(40)]
    assert all(header_values(e, "Connection") == ["close"] for e in copies)
    assert len(real.requests()) == 40
    assert mirrored(w, "failed") == 0 and mirrored(w, "dropped") == 0


def test_a_share_of_the_requests_is_copied(weir_factory, origin_factory):
    real, shadow = origin_factory("real"), origin_factory("shadow")
    w = start(weir_factory, real.addr, shadow.addr, percent=10)
    for i in range(500):
        assert one(w.port, "/echo")[0] == 200
    wait_until(lambda: mirrored(w, "sent") == len(shadow.requests()), slack(5), what="copies counted")
    n = len(shadow.requests())
    # 10% of 500, drawn at random: sd about 7
    assert 20 <= n <= 80, n


def test_a_body_read_whole_is_copied_and_one_streamed_or_chunked_is_dropped(weir_factory, origin_factory):
    real, shadow = origin_factory("real"), origin_factory("shadow")
    w = start(weir_factory, real.addr, shadow.addr)
    small, mid, large, big = b"hello", os.urandom(9000), os.urandom(30000), os.urandom(200000)
    # 5 bytes stay behind the head in the input buffer, 9,000 bytes too
    # (16 KiB buffers); 30,000 are read whole into a body buffer but pass
    # what one copy holds (an I/O buffer); a chunked one is decoded (its
    # head says chunked); 200,000 bytes pass limits.body_buffer (64k): streamed
    for body in (small, mid, large, big):
        assert get(w.port, "/upload", method="POST", body=body).status == 200
    assert get(w.port, "/upload", method="POST", headers=[("Transfer-Encoding", "chunked")],
               body=chunked(small)).status == 200
    wait_until(lambda: mirrored(w, "sent") == 2, slack(5), what="2 copies answered")
    assert mirrored(w, "dropped") == 3
    got = sorted((e["body_len"], e["body_sha256"]) for e in shadow.requests())
    assert got == sorted((len(b), hashlib.sha256(b).hexdigest()) for b in (small, mid))
    assert len(real.requests()) == 5


@pytest.mark.normal_only
def test_a_stalled_shadow_does_not_slow_the_real_answers_and_the_copies_are_capped(weir_factory, origin_factory):
    real, shadow = origin_factory("real"), origin_factory("shadow")
    # the shadow's copies wait up to 30 s for an answer that never comes
    w = start(weir_factory, real.addr, shadow.addr, max_in_flight=4,
              shadow_raw='timeouts = { upstream_read = "30s"; };')
    t0 = time.monotonic()
    for i in range(30):
        status, hdrs, _ = one(w.port, "/on/shadow/stall")
        assert status == 200 and hdrs["x-origin"] == "real"
    took = time.monotonic() - t0
    # a real answer that waited on its copy would take 30 s; 30 of them here
    assert took < slack(10), took
    # at most 4 copies in flight per worker (2 workers): the rest dropped
    assert mirrored(w, "dropped") >= 30 - 8
    assert mirrored(w, "sent") == 0 and mirrored(w, "failed") == 0
    wait_until(lambda: len(shadow.entries()) >= 1, slack(5), what="the shadow got the stalled copies")


def test_a_dead_shadow_fails_its_copies_only(weir_factory, origin_factory):
    real = origin_factory("real")
    w = start(weir_factory, real.addr, "127.0.0.1:%d" % closed_port())
    for i in range(20):
        assert one(w.port, "/echo")[0] == 200
    wait_until(lambda: mirrored(w, "failed") == 20, slack(5), what="20 copies failed")
    assert mirrored(w, "sent") == 0 and len(real.requests()) == 20
    # the shadow's servers are not marked down by copies: no error answered either
    assert w.metrics()("weir_responses_total", **{"class": "2xx"}) == 20


def test_weir_t_refuses_bad_mirrors_with_their_line(tmp_path):
    rc, err, _ = check(tmp_path, 'mirror = { upstream = "v2"; percent = 10; };')
    assert rc == 0, err
    for extra, msg in [
        ('mirror = { upstream = "v3"; percent = 10; };', 'routes.mirror upstream "v3" is not defined'),
        ('mirror = { upstream = "v2"; percent = 0; };', "routes.mirror.percent must be"),
        ('mirror = { upstream = "v2"; percent = 101; };', "routes.mirror.percent must be"),
        ('mirror = { upstream = "v2"; };', "routes.mirror.percent is required"),
        ('mirror = { percent = 5; };', "routes.mirror.upstream is required"),
        ('mirror = { upstream = "v2"; percent = 5; max_in_flight = 0; };', "routes.mirror.max_in_flight must be"),
        ('mirror = { upstream = "v2"; percent = 5; body = true; };', 'unknown key "body"'),
    ]:
        rc, err, where = check(tmp_path, extra)
        assert rc == 1 and msg in err and where in err, (extra, err)
