"""Header rules (routes.headers, upstreams.headers): request headers set,
added and removed as the origin receives them, byte for byte; response
headers as the client receives them, byte for byte; the group's rules
before the route's; variables, $jwt_claim_NAME included; a value that
cannot be a header dropped and counted; weir -t refusing bad rules with
their lines; a reload changing the rules under load without a failed
request."""

import base64
import json
import threading
import time

import pytest

from harness import Client, build_request, free_port, render_config, slack, wait_until, weir_check


def echo(w, target="/echo", headers=(), host="localhost"):
    with Client(w.port) as c:
        c.send(build_request("GET", target, host=host, headers=headers))
        r = c.read_response()
    assert r.status == 200, r.raw_head
    return r, json.loads(r.body)


def hw(weir_factory, origin, route_rules="", group_rules="", **kw):
    up = {"name": "a", "servers": [origin.addr]}
    if group_rules:
        up["raw"] = "headers = { %s };" % group_rules
    route = {"path": "/", "upstream": "a"}
    if route_rules:
        route["extra"] = "headers = { %s }; " % route_rules
    return weir_factory(upstreams=[up], routes=kw.pop("routes", []) + [route], **kw)


REQ = ('request = { remove = [ "X-Debug", "Cookie" ]; '
       'set = { X-Client = "$client_ip"; X-Path = "$path?$query_string"; X-Static = "one two"; }; '
       'add = { X-Trace = "weir $method"; X-Trace2 = "$http_x_in"; }; };')


def test_request_rules_reach_the_origin_byte_for_byte(weir_factory, origin):
    w = hw(weir_factory, origin, REQ)
    r, got = echo(w, "/echo/p?q=1", headers=[("X-Debug", "1"), ("x_debug", "lookalike"), ("X-Client", "forged"),
                                             ("X-In", "from the client"), ("Cookie", "a=1"), ("X-Keep", "k")])
    assert got["headers"] == [
        ["Host", "localhost"], ["X-In", "from the client"], ["X-Keep", "k"],
        ["X-Client", "127.0.0.1"], ["X-Path", "/echo/p?q=1"], ["X-Static", "one two"],
        ["X-Trace", "weir GET"], ["X-Trace2", "from the client"],
        ["X-Forwarded-For", "127.0.0.1"], ["X-Forwarded-Proto", "http"], ["Via", "1.1 weir"]]


def test_group_rules_come_first_and_the_route_overrides_them(weir_factory, origin):
    group = ('request = { set = { X-Env = "group"; X-Group = "g"; }; add = { X-Both = "group"; }; }; '
             'response = { set = { X-Resp = "group"; }; };')
    route = ('request = { remove = [ "X-Group" ]; set = { X-Env = "route"; }; add = { X-Both = "route"; }; }; '
             'response = { add = { X-Resp = "route"; }; };')
    w = hw(weir_factory, origin, route, group,
           routes=[{"path": "/echo/plain", "upstream": "a"}])
    r, got = echo(w)
    assert [h for h in got["headers"] if h[0].startswith("X-") and h[0] not in ("X-Forwarded-For",
                                                                              "X-Forwarded-Proto")] == [
        ["X-Both", "group"], ["X-Env", "route"], ["X-Both", "route"]]  # a set header goes last
    assert r.get_all("X-Resp") == ["group", "route"]
    # a route of the same group without rules of its own gets the group's
    r, got = echo(w, "/echo/plain")
    assert ["X-Env", "group"] in got["headers"] and ["X-Group", "g"] in got["headers"]
    assert r.get_all("X-Resp") == ["group"]


def test_response_rules_reach_the_client_byte_for_byte(weir_factory, origin):
    rules = ('response = { remove = [ "Cache-Control", "x_end_to_end" ]; '
             'set = { Set-Cookie = "only=1"; Strict-Transport-Security = "max-age=31536000"; }; '
             'add = { X-Served-By = "$upstream_addr $status"; X-Empty = "$http_x_absent"; }; };')
    w = hw(weir_factory, origin, rules)
    with Client(w.port) as c:
        c.send(build_request("GET", "/respheaders"))
        r = c.read_response()
    assert r.raw_head == ("HTTP/1.1 200 OK\r\nX-Origin: A\r\nSet-Cookie: only=1\r\n"
                          "Strict-Transport-Security: max-age=31536000\r\n"
                          "X-Served-By: %s 200\r\nVia: 1.1 weir\r\nContent-Length: 8\r\n\r\n"
                          % origin.addr).encode()


def test_set_with_an_empty_value_removes_and_add_adds_nothing(weir_factory, origin):
    w = hw(weir_factory, origin, 'request = { set = { X-Who = "$consumer"; }; add = { X-None = "$arg_nope"; }; };')
    _, got = echo(w, headers=[("X-Who", "forged")])
    names = [n for n, _ in got["headers"]]
    assert "X-Who" not in names and "X-None" not in names


def test_a_value_past_4k_is_dropped_and_counted(weir_factory, origin):
    w = hw(weir_factory, origin, 'request = { set = { X-Uri = "$request_uri"; }; };',
           limits={"header_size": "32k", "uri_size": "16k"})
    before = w.metrics().error("header_rule_dropped")
    _, got = echo(w, "/echo/" + "a" * 5000, headers=[("X-Uri", "forged")])
    assert [n for n, _ in got["headers"] if n == "X-Uri"] == []
    assert w.metrics().error("header_rule_dropped") == before + 1
    wait_until(lambda: any("header rule X-Uri not applied" in l for l in w.error_lines()), slack(3))
    _, got = echo(w, "/echo/short")
    assert ["X-Uri", "/echo/short"] in got["headers"]
    assert w.metrics().error("header_rule_dropped") == before + 1


jwt = None


def test_jwt_claims_are_variables_of_request_rules(weir_factory, origin, tmp_path):
    global jwt
    jwt = pytest.importorskip("jwt")
    secret = b"an HMAC secret of more than 32 bytes, for HS tokens"
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{"kty": "oct", "kid": "k1", "alg": "HS256",
                                          "k": base64.urlsafe_b64encode(secret).rstrip(b"=").decode()}]}))
    w = hw(weir_factory, origin, 'request = { set = { X-Sub = "$jwt_claim_sub"; X-Tenant = "t=$jwt_claim_tenant"; '
                                 'X-Admin = "$jwt_claim_admin"; X-Nested = "$jwt_claim_obj"; }; };',
           routes=[])
    text = open(w.conf).read().replace('upstream = "a"; headers',
                                       'upstream = "a"; auth = { type = "jwt"; jwks_file = "%s"; }; headers' % jwks)
    w.stop()
    open(w.conf, "w").write(text)
    w.start()
    tok = jwt.encode({"sub": "alice", "tenant": 42, "admin": True, "obj": {"a": 1},
                      "exp": int(time.time()) + 600}, secret, algorithm="HS256", headers={"kid": "k1"})
    for _ in range(2):  # verified, then from the cache: the claims either way
        _, got = echo(w, headers=[("Authorization", "Bearer " + tok), ("X-Sub", "forged")])
        xs = [h for h in got["headers"] if h[0] in ("X-Sub", "X-Tenant", "X-Admin", "X-Nested")]
        assert xs == [["X-Sub", "alice"], ["X-Tenant", "t=42"], ["X-Admin", "true"]]


def test_rules_apply_to_the_table_a_reload_brings_under_load(weir_factory, origin):
    from test_reload import hup_and_wait
    w = hw(weir_factory, origin, 'request = { set = { X-Version = "1"; }; }; '
                                 'response = { set = { X-Version = "1"; }; };')
    seen, bad, stop = set(), [], threading.Event()

    def load():
        deadline = time.time() + 15
        while not stop.is_set() and time.time() < deadline:
            try:
                with Client(w.port) as c:
                    for _ in range(20):
                        c.send(build_request("GET", "/echo"))
                        r = c.read_response()
                        if r.status != 200:
                            bad.append(r.status)
                            continue
                        up = [v for n, v in json.loads(r.body)["headers"] if n == "X-Version"]
                        if up != [r.get("X-Version")]:
                            bad.append((up, r.get("X-Version")))
                        seen.add(r.get("X-Version"))
                        if (r.get("Connection") or "").lower() == "close":
                            break  # a draining worker's last answer on it
            except Exception as e:  # noqa: BLE001: any failure counts
                bad.append(repr(e))

    th = [threading.Thread(target=load) for _ in range(2)]
    for t in th:
        t.start()
    try:
        wait_until(lambda: "1" in seen, slack(5))
        text = open(w.conf).read().replace('X-Version = "1"', 'X-Version = "2"')
        open(w.conf, "w").write(text)
        hup_and_wait(w)
        wait_until(lambda: "2" in seen, slack(5), what="the new rules")
    finally:
        stop.set()
        for t in th:
            t.join()
    assert bad == []


def weir_t(tmp_path, route_extra="", group_raw="", route_auth=""):
    up = {"name": "a", "servers": ["127.0.0.1:9"]}
    if group_raw:
        up["raw"] = group_raw
    text = render_config(str(tmp_path), free_port(), free_port(), upstreams=[up],
                         routes=[{"path": "/", "upstream": "a"},
                                 {"path": "/x", "upstream": "a", "extra": route_auth + route_extra}])
    return weir_check(tmp_path, text, '"/x"' if route_extra or route_auth else "headers")


@pytest.mark.parametrize("rules,why", [
    ('request = { set = { X-A = "a\\r\\nX-B: b"; }; };', "routes.headers.request.set.X-A must not hold CR or LF"),
    ('request = { set = { X-A = "a\\x01"; }; };', "must not hold control bytes"),
    ('request = { set = { X-A = "$nope"; }; };', "uses the unknown variable $nope"),
    ('request = { set = { Connection = "close"; }; };', '"Connection" must be a header name'),
    ('request = { remove = [ "Transfer_Encoding" ]; };', '"Transfer_Encoding" must be a header name'),
    ('response = { set = { Content-Length = "1"; }; };', '"Content-Length" must be a header name'),
    ('request = { set = { Host = "x"; }; };', '"Host" must be a header name'),
    ('response = { remove = [ "Keep-Alive" ]; };', '"Keep-Alive" must be a header name'),
    ('request = { add = { Proxy-Authorization = "x"; }; };', "is hop-by-hop (Proxy-*)"),
    ('response = { set = { X-Request-Id = "x"; }; };', "is weir's own"),
    ('request = { remove = [ "bad name" ]; };', '"bad name" must be a header name'),
    ('request = { set = { X-A = "$upstream_addr"; }; };', "a request rule runs before a server is picked"),
    ('response = { set = { X-A = "$jwt_claim_sub"; }; };', "claims are read in request rules only"),
    ('request = { replace = { X-A = "1"; }; };', 'unknown key "replace" in headers.request'),
    ('requests = { };', 'unknown key "requests" in headers'),
    ('request = { set = [ "X-A" ]; };', "routes.headers.request.set must be a group"),
    ('request = { remove = { X-A = "1"; }; };', "routes.headers.request.remove must be a list"),
    ('request = { set = { X-A = 1; }; };', "routes.headers.request.set values must be strings"),
])
def test_bad_rules_are_refused_with_their_line(tmp_path, rules, why):
    rc, err, where = weir_t(tmp_path, "headers = { %s }; " % rules)
    assert rc == 1, err
    assert where in err and why in err, err


def test_bad_group_rules_and_rules_on_a_return_or_a_vouched_name_are_refused(tmp_path):
    rc, err, where = weir_t(tmp_path, group_raw='headers = { request = { set = { Via = "x"; }; }; };')
    assert rc == 1 and where in err and "upstreams.headers.request.set" in err, err
    rc, err, where = weir_t(tmp_path, 'headers = { request = { set = { X-Consumer = "$consumer"; }; }; }; ',
                            route_auth='auth = { type = "api_key"; keys_file = "%s"; consumer_header = "X-Consumer"; }; '
                            % (tmp_path / "keys"))
    assert rc == 1 and "names X-Consumer, which weir vouches for" in err, err
    text = render_config(str(tmp_path), free_port(), free_port(), upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                         routes=[{"path": "/", "extra": 'return = { status = 200; }; headers = { response = { set = '
                                                         '{ X-A = "1"; }; }; }; '}])
    rc, err, where = weir_check(tmp_path, text, "return =")
    assert rc == 1 and where + "routes.headers needs an upstream" in err, err


def test_good_rules_pass_weir_t(tmp_path):
    rc, err, _ = weir_t(tmp_path, "headers = { %s }; " % REQ,
                        group_raw='headers = { response = { add = { X-A = "$upstream_addr"; }; }; };')
    assert rc == 0, err


def test_weir_T_prints_the_rules_and_reads_them_back(tmp_path):
    import subprocess
    from harness import WEIR_BIN
    text = render_config(str(tmp_path), free_port(), free_port(),
                         upstreams=[{"name": "a", "servers": ["127.0.0.1:9"],
                                     "raw": 'headers = { response = { set = { X-Frame-Options = "DENY"; }; }; };'}],
                         routes=[{"path": "/", "upstream": "a", "extra": "headers = { %s }; " % REQ}])
    (tmp_path / "a.conf").write_text(text)

    def dump(p):
        r = subprocess.run([WEIR_BIN, "-T", "-c", str(p)], capture_output=True, timeout=slack(10))
        assert r.returncode == 0, r.stderr
        return r.stdout.decode()

    one = dump(tmp_path / "a.conf")
    assert ('headers = { request = { remove = [ "X-Debug", "Cookie" ]; set = { X-Client = "${client_ip}"; '
            'X-Path = "${path}?${query_string}"; X-Static = "one two"; }; add = { X-Trace = "weir ${method}"; '
            'X-Trace2 = "${http_x_in}"; }; }; }; ') in one
    assert 'headers = { response = { set = { X-Frame-Options = "DENY"; }; }; };' in one
    (tmp_path / "b.conf").write_text(one)
    two = dump(tmp_path / "b.conf")
    # the secrets weir -T masks aside, what it printed reads back the same
    assert one[one.index("upstreams = ("):] == two[two.index("upstreams = ("):]
