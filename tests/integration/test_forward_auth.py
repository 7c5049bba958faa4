"""Forward authentication (routes.auth type "forward"): a subrequest to an
auth service (the origin's /auth, which decides on Authorization) with
the original method and URI and the chosen headers; 2xx lets the request
through with the chosen response headers; 401 and 403 are returned with
the service's body; another status is a 502, no answer a 503; a
per-worker result cache; counters by result; weir -t refusals."""

import json

import pytest

from harness import Client, build_request, free_port, render_config, slack, wait_until, weir_check


def fa_weir(weir_factory, origin, auth_extra="", auth_servers=None, workers=1):
    auth = 'auth = { type = "forward"; upstream = "authsvc"; path = "/auth"; ' \
           'response_headers = [ "X-Auth-User", "X-Auth-Role" ]; %s}; ' % auth_extra
    return weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]},
                                   {"name": "authsvc", "servers": auth_servers or [origin.addr]}],
                        routes=[{"path": "/", "upstream": "a", "extra": auth}], workers=workers)


def ask(w, target="/echo/x?y=1", token=None, method="GET", headers=(), body=None):
    hs = list(headers) + ([("Authorization", "Bearer " + token)] if token else [])
    with Client(w.port) as c:
        c.send(build_request(method, target, headers=hs, body=body))
        return c.read_response(method=method)


def counted(w, result, reason):
    labels = {"reason": reason} if reason else {}
    return w.metrics()("weir_auth_total", host="*", path="/", result=result, **labels)


def auth_requests(origin):
    return [e for e in origin.requests() if e["target"] == "/auth"]


def test_a_2xx_lets_the_request_through_with_the_chosen_headers(weir_factory, origin):
    w = fa_weir(weir_factory, origin)
    r = ask(w, token="good", headers=[("X-Auth-User", "forged"), ("X-Keep", "k"), ("Cookie", "s=1")])
    assert r.status == 200, r.raw_head
    got = json.loads(r.body)
    assert got["target"] == "/echo/x?y=1"
    assert got["headers"] == [
        ["Host", "localhost"], ["X-Keep", "k"], ["Cookie", "s=1"], ["Authorization", "Bearer good"],
        ["X-Auth-User", "alice"], ["X-Auth-Role", "admin"],
        ["X-Forwarded-For", "127.0.0.1"], ["X-Forwarded-Proto", "http"], ["Via", "1.1 weir"]]
    # what the auth service was asked, byte for byte
    sub = auth_requests(origin)
    assert len(sub) == 1 and sub[0]["method"] == "GET"
    assert sub[0]["headers"] == [
        ["Host", "localhost"], ["X-Original-Method", "GET"], ["X-Original-URI", "/echo/x?y=1"],
        ["X-Forwarded-For", "127.0.0.1"], ["X-Forwarded-Proto", "http"], ["X-Forwarded-Host", "localhost"],
        ["Authorization", "Bearer good"], ["Cookie", "s=1"], ["Content-Length", "0"]]
    assert counted(w, "ok", "") == 1


def test_the_original_method_goes_to_the_service_and_the_body_to_the_upstream(weir_factory, origin):
    w = fa_weir(weir_factory, origin)
    with Client(w.port) as c:
        for i in range(3):  # one connection: keep-alive across subrequests
            c.send(build_request("POST", "/echo/p%d" % i, body="x" * 1000,
                                 headers=[("Authorization", "Bearer good")]))
            r = c.read_response()
            assert r.status == 200
            assert json.loads(r.body)["body_len"] == 1000
    sub = auth_requests(origin)
    assert [e["method"] for e in sub] == ["POST"] * 3
    assert [e["body_len"] for e in sub] == [0] * 3
    assert len({e["conn"] for e in sub}) == 1, "the auth service's connection is pooled"


def test_a_401_and_a_403_are_returned_with_the_services_body(weir_factory, origin):
    w = fa_weir(weir_factory, origin)
    r = ask(w)
    assert r.raw_head == (b'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm="svc"\r\n'
                          b"Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n")
    assert r.body == b"who are you?\n"
    r = ask(w, token="forbidden")
    assert r.raw_head == b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\n"
    assert r.body == b"not yours\n"
    r = ask(w, token="chunked")
    assert r.status == 401 and r.body == b"who are you, in chunks?\n"
    assert [e for e in origin.requests() if e["target"].startswith("/echo")] == []
    assert counted(w, "denied", "forward_401") == 2
    assert counted(w, "forbidden", "forward_403") == 1


def test_another_status_is_a_502_and_no_answer_a_503(weir_factory, origin):
    w = fa_weir(weir_factory, origin)
    assert ask(w, token="teapot").status == 502
    assert counted(w, "error", "forward_status") == 1
    assert w.metrics().error("forward_auth_failed") == 1
    wait_until(lambda: any("it answered 418" in l for l in w.error_lines()), slack(3))
    down = fa_weir(weir_factory, origin, auth_servers=["127.0.0.1:%d" % free_port()])
    assert ask(down, token="good").status == 503
    assert counted(down, "error", "forward_unreachable") == 1
    assert [e for e in origin.requests() if e["target"].startswith("/echo")] == []


def test_a_slow_service_is_a_503_after_the_timeout(weir_factory, origin):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]},
                                {"name": "authsvc", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a",
                              "extra": 'auth = { type = "forward"; upstream = "authsvc"; path = "/sleep/2000/auth"; '
                                       'timeout = "300ms"; }; '}], workers=1)
    r = ask(w, token="good")
    assert r.status == 503
    assert counted(w, "error", "forward_timeout") == 1
    assert w.metrics().error("forward_auth_unreachable") == 1


def test_results_are_cached_per_worker_by_the_cache_key(weir_factory, origin):
    w = fa_weir(weir_factory, origin, 'cache = "10s"; cache_key = [ "Authorization" ]; ')
    for _ in range(5):
        assert ask(w, token="good", headers=[("Cookie", "varies=%d" % _)]).status == 200
    for _ in range(3):
        r = ask(w, token="forbidden")
        assert r.status == 403 and r.body == b"not yours\n"
    assert len(auth_requests(origin)) == 2
    m = w.metrics()
    assert m("weir_auth_cached_total", host="*", path="/") == 6
    assert counted(w, "ok", "") == 5 and counted(w, "forbidden", "forward_403") == 3
    # the cached 2xx still carries its headers upstream
    got = json.loads(ask(w, token="good").body)
    assert ["X-Auth-User", "alice"] in got["headers"]


def weir_t(tmp_path, auth, ups=()):
    text = render_config(str(tmp_path), free_port(), free_port(),
                         upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}] + list(ups),
                         routes=[{"path": "/", "upstream": "a", "extra": "auth = { %s }; " % auth}])
    return weir_check(tmp_path, text, "auth = {")


@pytest.mark.parametrize("auth,why", [
    ('type = "forward"; ', 'routes.auth.upstream is required for type "forward"'),
    ('type = "forward"; upstream = "nope"; ', 'routes.auth.upstream "nope" is not defined'),
    ('type = "forward"; upstream = "a"; path = "auth"; ', "routes.auth.path \"auth\" must start with '/'"),
    ('type = "forward"; upstream = "a"; request_headers = [ "Host" ]; ', "must be a header name weir does not"),
    ('type = "forward"; upstream = "a"; timeout = "0s"; ', "routes.auth.timeout"),
    ('type = "jwt"; upstream = "a"; jwks_file = "/nonexistent"; ', 'routes.auth.upstream is not a key of type "jwt"'),
])
def test_bad_forward_policies_are_refused_with_their_line(tmp_path, auth, why):
    rc, err, where = weir_t(tmp_path, auth)
    assert rc == 1, err
    assert where in err and why in err, err


def test_a_tls_auth_group_is_refused(tmp_path):
    rc, err, _ = weir_t(tmp_path, 'type = "forward"; upstream = "s"; ',
                        ups=[{"name": "s", "servers": ["127.0.0.1:9"], "raw": 'proxy_protocol = "v1";'}])
    assert rc == 1 and "must be a plain HTTP group" in err, err


def test_a_pooled_connection_the_service_closed_is_replaced_by_a_fresh_one(weir_factory, origin):
    # /close-on-next answers, then drops the next request on that connection
    # unanswered: what a pooled connection closed as it idled looks like
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]},
                                {"name": "authsvc", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a",
                              "extra": 'auth = { type = "forward"; upstream = "authsvc"; path = "/close-on-next"; }; '}],
                     workers=1)
    for _ in range(4):
        assert ask(w, token="good").status == 200
    sub = [e for e in origin.requests() if e["target"] == "/close-on-next"]
    assert len([e for e in sub if e.get("dropped")]) == 3
    assert counted(w, "ok", "") == 4


def test_weir_T_prints_a_forward_policy_whole(tmp_path):
    import subprocess
    from harness import WEIR_BIN
    text = render_config(str(tmp_path), free_port(), free_port(),
                         upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         routes=[{"path": "/", "upstream": "a",
                                  "extra": 'auth = { type = "forward"; upstream = "a"; path = "/check"; '
                                           'response_headers = [ "X-User" ]; cache = "10s"; }; '}])
    (tmp_path / "a.conf").write_text(text)
    r = subprocess.run([WEIR_BIN, "-T", "-c", str(tmp_path / "a.conf")], capture_output=True, timeout=slack(10))
    out = r.stdout.decode()
    assert ('auth = { type = "forward"; realm = "weir"; upstream = "a"; path = "/check"; cache = "10s"; '
            'timeout = "5s"; request_headers = [ "Authorization", "Cookie" ]; response_headers = [ "X-User" ]; '
            'cache_key = [ "Authorization", "Cookie" ]; };') in out, out
    rc, err, _ = weir_check(tmp_path, out, "auth = {")
    assert rc == 0, err
