"""Keep-alive on both sides, pipelining, upstream connection reuse."""

import threading
import time

from harness import Client, build_request, established_to, settle, simple, slack, wait_until


def test_a_client_connection_serves_many_requests_in_sequence(weir, origin):
    with weir.client() as c:
        for i in range(20):
            r = c.request("GET", "/bytes/%d" % (i + 1))
            assert r.status == 200 and r.body == b"x" * (i + 1)
            assert "close" not in r.connection_tokens()
        assert c.is_open()
    assert len(origin.requests("/bytes/")) == 20


def test_a_client_saying_connection_close_gets_close_and_the_socket_is_closed(weir):
    with weir.client() as c:
        r = c.request("GET", "/", headers=[("Connection", "close")])
        assert r.status == 200 and r.body == b"hello from origin\n"
        assert "close" in r.connection_tokens()
        assert c.closed_by_peer(2)


def test_an_http10_client_without_keep_alive_is_closed_after_the_response(weir):
    with weir.client() as c:
        r = c.request("GET", "/bytes/10", version="1.0")
        assert r.status == 200 and r.body == b"x" * 10
        assert c.closed_by_peer(2)


def test_an_http10_client_never_gets_a_chunked_response(weir):
    with weir.client() as c:
        r = c.request("GET", "/chunked/2500", version="1.0")
        assert r.status == 200 and not r.chunked
        assert r.body == b"x" * 2500
        assert not r.has("Transfer-Encoding")


def test_pipelined_requests_are_answered_in_order(weir, origin):
    with weir.client() as c:
        c.send(b"".join(build_request("GET", "/bytes/%d" % n) for n in (1, 2, 3, 4, 5)))
        for n in (1, 2, 3, 4, 5):
            r = c.read_response()
            assert r.status == 200 and r.body == b"x" * n
        assert c.is_open()


def test_a_slow_first_pipelined_request_does_not_let_the_second_overtake_it(weir):
    with weir.client() as c:
        c.send(build_request("GET", "/slow/400") + build_request("GET", "/bytes/7")
               + build_request("GET", "/chunked/1500"))
        r1 = c.read_response()
        r2 = c.read_response()
        r3 = c.read_response()
        assert r1.body == b"slow\n"
        assert r2.body == b"x" * 7
        assert r3.body == b"x" * 1500


def test_pipelined_requests_sent_one_byte_at_a_time_are_all_answered(weir):
    data = build_request("GET", "/bytes/3") + build_request("POST", "/upload", body=b"hello")
    with weir.client() as c:
        for i in range(len(data)):
            c.send(data[i:i + 1])
        assert c.read_response().body == b"xxx"
        assert c.read_response().json()["body_len"] == 5


def test_upstream_connections_are_reused_across_requests(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    m0 = w.metrics()
    with w.client() as c:
        for _ in range(20):
            assert c.request("GET", "/echo").status == 200
    settle()
    m1 = w.metrics()
    connects = m1("weir_upstream_connects_total") - m0("weir_upstream_connects_total")
    reuses = m1("weir_upstream_reuses_total") - m0("weir_upstream_reuses_total")
    assert connects <= 2, (connects, reuses)
    assert reuses >= 18, (connects, reuses)
    assert len({e["conn"] for e in origin.requests("/echo")}) <= 2


def test_upstream_connections_are_reused_across_client_connections(weir_factory, origin):
    w = simple(weir_factory, origin, workers=2)
    for _ in range(20):
        assert w.get("/echo").status == 200
    settle()
    m = w.metrics()
    conns = {e["conn"] for e in origin.requests("/echo")}
    assert len(conns) <= 2, conns
    assert m("weir_upstream_connects_total") <= 2
    assert m("weir_upstream_reuses_total") >= 18


def test_connections_past_keepalive_that_the_load_keeps_using_are_not_trimmed(weir_factory, origin):
    # six clients in step: all six send at once (six upstream connections
    # in use, four past keepalive), then all wait 120 ms (all six idle).
    # A tick most likely falls in a pause; it closes only what no request
    # took during the second before it, so the pool is not cut back to 2
    # and opened again after each tick
    w = simple(weir_factory, origin, workers=1, upstream_opts={"keepalive": 2})
    stop = time.monotonic() + 4.5
    rounds = threading.Barrier(6)
    errors = []

    def loop():
        try:
            with Client(w.port) as c:
                while True:
                    rounds.wait(timeout=10)
                    if time.monotonic() >= stop:
                        return
                    c.send(build_request("GET", "/slow/30"))
                    assert c.read_response().status == 200
                    time.sleep(0.12)
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)
    threads = [threading.Thread(target=loop) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    m = w.metrics()
    # six, and a few more should a client lag behind the others by a
    # request's time in some second
    assert m("weir_upstream_connects_total") <= 9, m("weir_upstream_connects_total")
    # idle now: past keepalive, they go within two ticks
    wait_until(lambda: established_to(origin.port) <= 2, slack(4), what="pool trimmed to 2")


def test_keepalive_zero_opens_a_new_upstream_connection_per_request(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, upstream_opts={"keepalive": 0})
    with w.client() as c:
        for _ in range(5):
            assert c.request("GET", "/echo").status == 200
    settle()
    assert len({e["conn"] for e in origin.requests("/echo")}) == 5
    assert w.metrics()("weir_upstream_reuses_total") == 0


def test_the_upstream_pool_holds_at_most_keepalive_idle_connections(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1, upstream_opts={"keepalive": 2})
    # 6 concurrent slow requests need 6 upstream connections at once
    clients = [Client(w.port) for _ in range(6)]
    for c in clients:
        c.send(build_request("GET", "/slow/300"))
    for c in clients:
        assert c.read_response().status == 200
        c.close()
    settle(0.3)
    before = len({e["conn"] for e in origin.requests()})
    assert before == 6
    # only 2 of the 6 stay open in the pool: the 4 past keepalive are
    # parked until the worker's next tick closes them (a burst's
    # connections are there for the next burst in the same second)
    wait_until(lambda: established_to(origin.port) <= 2, slack(3), what="pool trimmed to 2")
    assert w.metrics()("weir_upstream_pool_trimmed_total") == 4
    for _ in range(6):
        assert w.get("/echo").status == 200
    conns = {e["conn"] for e in origin.requests("/echo")}
    assert len(conns) <= 2, conns


def test_many_concurrent_clients_each_get_their_own_answers(weir, origin):
    errors = []

    def run(i):
        try:
            with Client(weir.port, timeout=10) as c:
                for j in range(5):
                    n = i * 10 + j + 1
                    r = c.request("GET", "/bytes/%d" % n)
                    if r.status != 200 or r.body != b"x" * n:
                        errors.append((i, j, r))
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(slack(30))
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert len(origin.requests("/bytes/")) == 250


def test_an_idle_client_connection_is_closed_after_client_keepalive(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"client_keepalive": "1s"})
    with w.client() as c:
        assert c.request("GET", "/").status == 200
        t = time.monotonic()
        assert c.closed_by_peer(4)
        assert time.monotonic() - t >= 0.8


def test_a_client_that_closes_after_its_request_does_not_disturb_the_worker(weir, origin):
    for _ in range(5):
        c = Client(weir.port)
        c.send(build_request("GET", "/slow/200"))
        c.close()
    time.sleep(slack(0.5))
    with weir.client() as c:
        assert c.request("GET", "/echo").status == 200
    assert weir.proc.poll() is None


def test_a_hundred_pipelined_requests_in_one_write_are_answered_in_order(weir):
    with weir.client(timeout=10) as c:
        c.send(b"".join(build_request("GET", "/bytes/%d" % (n % 50 + 1)) for n in range(100)))
        for n in range(100):
            r = c.read_response()
            assert r.status == 200 and r.body == b"x" * (n % 50 + 1), n
        assert c.is_open()


def test_pipelined_requests_with_bodies_stay_in_sync(weir, origin):
    data = b"".join([
        build_request("POST", "/upload", body=b"first"),
        build_request("POST", "/upload", headers=[("Transfer-Encoding", "chunked")],
                      body=b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
        build_request("GET", "/bytes/3"),
        build_request("POST", "/upload", body=b""),
    ])
    with weir.client() as c:
        c.send(data)
        assert c.read_response().json()["body_len"] == 5
        assert c.read_response().json()["body_len"] == 5
        assert c.read_response().body == b"xxx"
        assert c.read_response().json()["body_len"] == 0
    assert [e["target"] for e in origin.requests()] == ["/upload", "/upload", "/bytes/3", "/upload"]


def test_requests_pipelined_after_connection_close_are_not_answered(weir, origin):
    with weir.client() as c:
        c.send(build_request("GET", "/bytes/1", headers=[("Connection", "close")])
               + build_request("GET", "/after-close"))
        r = c.read_response()
        assert r.body == b"x"
        assert c.closed_by_peer(2)
    time_limit = slack(0.3)
    time.sleep(time_limit)
    assert origin.requests("/after-close") == []


def test_a_client_that_disconnects_mid_body_is_counted_and_does_not_poison_the_pool(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    m0 = w.metrics()
    c = Client(w.port)
    c.send(build_request("POST", "/upload", headers=[("Content-Length", "1000000")]) + b"y" * 100000)
    time.sleep(slack(0.3))
    c.close()
    wait_until(lambda: w.metrics().error("client_closed") > m0.error("client_closed"), slack(3),
               what="client_closed counted")
    with w.client() as c2:
        for _ in range(3):
            r = c2.request("POST", "/upload", body=b"ok")
            assert r.status == 200 and r.json()["body_len"] == 2
    assert len(origin.requests("/upload")) == 3


def test_a_client_that_never_reads_its_response_is_dropped_after_client_send(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"client_send": "1s", "upstream_read": "10s"})
    m0 = w.metrics()
    c = Client(w.port, rcvbuf=4096)
    try:
        c.send(build_request("GET", "/bytes/%d" % (64 << 20)))
        wait_until(lambda: w.metrics().error("client_timeout") > m0.error("client_timeout"),
                   slack(6), interval=0.2, what="client_timeout counted")
    finally:
        c.close()
    assert w.get("/bytes/2").body == b"xx"


def test_an_upstream_connection_the_origin_marked_close_is_never_reused(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    m0 = w.metrics()
    with w.client() as c:
        for _ in range(5):
            r = c.request("GET", "/conn-close")
            assert r.status == 200 and r.body == b"closing\n"
            # the client connection is not closed because the upstream one was
            assert "close" not in r.connection_tokens()
    settle()
    m1 = w.metrics()
    assert m1("weir_upstream_reuses_total") - m0("weir_upstream_reuses_total") == 0
    assert m1("weir_upstream_connects_total") - m0("weir_upstream_connects_total") == 5
    assert len(origin.requests("/conn-close")) == 5


def test_an_http10_client_gets_a_read_to_close_response_and_then_the_close(weir):
    with weir.client() as c:
        r = c.request("GET", "/close/5000", version="1.0")
        assert r.status == 200 and r.body == b"x" * 5000
        assert not r.chunked
        assert c.eof or c.closed_by_peer(2)


def test_an_http10_response_from_the_origin_is_not_reused(weir_factory, origin):
    w = simple(weir_factory, origin, workers=1)
    m0 = w.metrics()
    with w.client() as c:
        for _ in range(4):
            r = c.request("GET", "/http10")
            assert r.status == 200 and r.body == b"old10\n"
    settle()
    m1 = w.metrics()
    assert m1("weir_upstream_reuses_total") - m0("weir_upstream_reuses_total") == 0
    assert len({e["conn"] for e in origin.requests("/http10")}) == 4
