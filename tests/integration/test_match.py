"""Matching beyond host and prefix (path_exact, path_regex, methods,
match_headers, match_query) and path rewrites (strip_prefix, rewrite):
each matcher taken and refused, the order among overlapping routes, the
forwarded target byte for byte at the origin, refusals with their
counters, weir -t errors with their lines, and regexes swapped by reloads
under load without a failed request."""

import hashlib
import os
import signal
import subprocess
import threading
import time

import pytest

from harness import Client, WEIR_BIN, proc_stat, slack, wait_until


def cpu_seconds(pid):
    f = proc_stat(pid)
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def answer(name):
    """A route answered by weir with <name> as its body: which route took
    a request, without an upstream."""
    return 'return = { status = 200; body = "%s"; }; ' % name


def route(path, name, extra=""):
    return {"path": path, "extra": extra + answer(name)}


def start(weir_factory, origin, routes, **kw):
    return weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=routes, **kw)


def took(w, target, method="GET", headers=()):
    with Client(w.port) as c:
        r = c.request(method, target, headers=list(headers))
    if r.status == 404:
        return "404"
    assert r.status == 200, r
    return r.body.decode() if method != "HEAD" else "(head)"


def test_path_exact_takes_the_whole_path_only(weir_factory, origin):
    w = start(weir_factory, origin, [
        {"path": None, "extra": 'path_exact = "/x"; ' + answer("exact")},
        route("/x", "prefix"),
        route("/", "root"),
    ])
    assert took(w, "/x") == "exact"
    assert took(w, "/x?q=1") == "exact"  # the query is no part of the path
    assert took(w, "/x/") == "prefix"
    assert took(w, "/xy") == "prefix"
    assert took(w, "/X") == "root"  # with case
    assert took(w, "/y") == "root"
    # a path normalised first, as for prefixes
    assert took(w, "/a/../x") == "exact"


def test_path_regex_is_tried_among_its_paths_routes(weir_factory, origin):
    w = start(weir_factory, origin, [
        route("/api/", "regex", 'path_regex = "^/api/v[0-9]+/"; '),
        route("/api/", "api"),
        route("/", "root", 'path_regex = "\\\\.json$"; '),
        route("/", "root-plain"),
    ])
    assert took(w, "/api/v2/users") == "regex"
    assert took(w, "/api/v10/") == "regex"
    assert took(w, "/api/vx/") == "api"
    assert took(w, "/api/V2/") == "api"
    assert took(w, "/api/v2") == "api"
    # the regex sees the path, not the query
    assert took(w, "/a.json?x=1") == "root"
    assert took(w, "/a?x=.json") == "root-plain"
    # a regex route counts under its label, its backslash escaped in /metrics (\\)
    m = wait_until(lambda: (lambda m: m if m("weir_route_requests_total", host="*", path="/ ~\\\\.json$") == 1
                            else None)(w.metrics()), slack(3), what="the regex route's counter")
    assert m("weir_route_requests_total", host="*", path="/api/ ~^/api/v[0-9]+/") == 2
    # each worker compiled them once, at its start, with the JIT
    lines = [l for l in w.error_lines() if "route regex(es)" in l]
    assert len(lines) == 2 and all("2 route regex(es) of generation 1 compiled, 2 with the JIT" in l
                                   for l in lines), lines


def test_methods_take_their_set_and_refuse_the_others(weir_factory, origin):
    w = start(weir_factory, origin, [
        route("/m", "read", 'methods = [ "GET", "HEAD" ]; '),
        route("/m", "write", 'methods = [ "POST", "PUT", "PATCH" ]; '),
        route("/m", "other"),
    ])
    assert took(w, "/m") == "read"
    with Client(w.port) as c:
        r = c.request("HEAD", "/m")
        assert r.status == 200 and r.get("Content-Length") == "4", r
    assert took(w, "/m", "POST") == "write"
    assert took(w, "/m", "PATCH") == "write"
    assert took(w, "/m", "DELETE") == "other"
    assert took(w, "/m", "OPTIONS") == "other"


def test_header_conditions_exact_prefix_regex_present_absent(weir_factory, origin):
    w = start(weir_factory, origin, [
        route("/h", "v2", 'match_headers = ( { name = "X-V"; exact = "2"; } ); '),
        route("/h", "v3", 'match_headers = ( { name = "X-V"; prefix = "3."; } ); '),
        route("/h", "v45", 'match_headers = ( { name = "X-V"; regex = "^[45]$"; } ); '),
        route("/h", "debug", 'match_headers = ( { name = "X-Debug"; present = true; } ); '),
        route("/h", "plain"),
        route("/a", "nodebug", 'match_headers = ( { name = "X-Debug"; present = false; } ); '),
        route("/a", "withdebug"),
        route("/both", "both", 'match_headers = ( { name = "X-A"; exact = "1"; }, { name = "X-B"; exact = "2"; } ); '),
        route("/both", "not-both"),
    ])
    assert took(w, "/h", headers=[("X-V", "2")]) == "v2"
    assert took(w, "/h", headers=[("x-v", "2")]) == "v2"  # the name without case
    assert took(w, "/h", headers=[("X-V", "22")]) == "plain"  # exact is exact
    assert took(w, "/h", headers=[("X-V", "3.1")]) == "v3"
    assert took(w, "/h", headers=[("X-V", "3")]) == "plain"
    assert took(w, "/h", headers=[("X-V", "4")]) == "v45"
    assert took(w, "/h", headers=[("X-V", "44")]) == "plain"
    assert took(w, "/h", headers=[("X-Debug", "")]) == "debug"
    # equal conditions: file order
    assert took(w, "/h", headers=[("X-Debug", "1"), ("X-V", "2")]) == "v2"
    # any one of several headers of the name will do
    assert took(w, "/h", headers=[("X-V", "9"), ("X-V", "2")]) == "v2"
    assert took(w, "/h") == "plain"
    assert took(w, "/a") == "nodebug"
    assert took(w, "/a", headers=[("X-Debug", "0")]) == "withdebug"
    assert took(w, "/both", headers=[("X-A", "1"), ("X-B", "2")]) == "both"
    assert took(w, "/both", headers=[("X-A", "1")]) == "not-both"
    assert took(w, "/both", headers=[("X-A", "1"), ("X-B", "3")]) == "not-both"


def test_query_conditions_compare_the_arguments_as_sent(weir_factory, origin):
    w = start(weir_factory, origin, [
        route("/q", "q2", 'match_query = ( { name = "v"; exact = "2"; } ); '),
        route("/q", "flag", 'match_query = ( { name = "flag"; present = true; } ); '),
        route("/q", "re", 'match_query = ( { name = "id"; regex = "^[0-9]+$"; } ); '),
        route("/q", "plain"),
        route("/n", "none", 'match_query = ( { name = "debug"; present = false; } ); '),
        route("/n", "debug"),
    ])
    assert took(w, "/q?v=2") == "q2"
    assert took(w, "/q?a=1&v=2&b") == "q2"
    assert took(w, "/q?v=22") == "plain"
    assert took(w, "/q?vv=2") == "plain"
    assert took(w, "/q?v=%32") == "plain"  # not percent-decoded
    assert took(w, "/q?flag") == "flag"
    assert took(w, "/q?flag=") == "flag"
    assert took(w, "/q?id=42") == "re"
    assert took(w, "/q?id=4x") == "plain"
    assert took(w, "/q") == "plain"
    assert took(w, "/q?") == "plain"
    assert took(w, "/n") == "none"
    assert took(w, "/n?x=1") == "none"
    assert took(w, "/n?x=1&debug") == "debug"


def test_overlapping_routes_exact_then_longest_prefix_then_more_conditions_then_file_order(
        weir_factory, origin):
    # written in the reverse of the order they are tried in
    w = start(weir_factory, origin, [
        route("/", "root"),
        route("/", "root-regex", 'path_regex = "^/o"; '),
        route("/o", "one", 'methods = [ "GET" ]; '),
        route("/o", "two", 'methods = [ "GET" ]; match_headers = ( { name = "X-A"; present = true; } ); '),
        {"path": None, "extra": 'path_exact = "/o"; ' + answer("exact")},
        route("/o/", "longer", 'methods = [ "GET" ]; '),
    ])
    assert took(w, "/o") == "exact"
    assert took(w, "/o", "POST") == "exact"
    assert took(w, "/ox", headers=[("X-A", "1")]) == "two"
    assert took(w, "/ox") == "one"
    # none of /o's takes a POST: the walk goes on to /'s, regex first
    assert took(w, "/ox", "POST") == "root-regex"
    assert took(w, "/o/z", headers=[("X-A", "1")]) == "longer"
    assert took(w, "/o/z", "PUT", headers=[("X-A", "1")]) == "root-regex"
    assert took(w, "/p") == "root"


def test_a_route_with_conditions_has_its_own_counters(weir_factory, origin):
    w = start(weir_factory, origin, [
        route("/c", "get", 'methods = [ "GET" ]; '),
        route("/c", "any"),
    ])
    took(w, "/c")
    took(w, "/c")
    took(w, "/c", "POST")
    m = wait_until(lambda: (lambda m: m if m("weir_route_requests_total", host="*", path="/c GET") == 2 else None)(
        w.metrics()), slack(3), what="the GET route's counter")
    assert m("weir_route_requests_total", host="*", path="/c") == 1


def echoed(w, origin, target, method="GET", headers=()):
    """The target the origin got for <target>."""
    origin.clear_log()
    with Client(w.port) as c:
        r = c.request(method, target, headers=list(headers))
    assert r.status == 200, r
    got = wait_until(lambda: (lambda l: l if l else None)(origin.requests()), slack(3), what="the origin's request")
    return got[-1]["target"]


def test_strip_prefix_and_rewrite_reach_the_origin_byte_for_byte(weir_factory, origin):
    w = start(weir_factory, origin, [
        {"path": "/api/", "upstream": "a", "extra": "strip_prefix = true; "},
        {"path": "/svc/v1/", "upstream": "a", "extra": 'strip_prefix = "/svc"; '},
        {"path": "/bare", "upstream": "a", "extra": "strip_prefix = true; "},
        {"path": "/old/", "upstream": "a",
         "extra": 'rewrite = { regex = "^/old/([^/]+)/(.*)"; replace = "/echo/new/$2/${1}"; }; '},
        {"path": "/named/", "upstream": "a",
         "extra": 'rewrite = { regex = "^/named/(?<rest>.*)"; replace = "/echo/n/${rest}$$"; }; '},
        {"path": "/opt/", "upstream": "a",
         "extra": 'rewrite = { regex = "^/opt/(x)?(.*)"; replace = "/echo/$1-$2"; }; '},
        {"path": "/both/", "upstream": "a",
         "extra": 'strip_prefix = "/both"; rewrite = { regex = "^/x/"; replace = "/echo/"; }; '},
        {"path": "/", "upstream": "a"},
    ])
    assert echoed(w, origin, "/api/echo/a%2Fb?x=1&y=%20") == "/echo/a%2Fb?x=1&y=%20"
    assert echoed(w, origin, "/svc/v1/echo") == "/v1/echo"
    assert echoed(w, origin, "/bare?q") == "/?q"
    assert echoed(w, origin, "/bare/echo") == "/echo"
    assert echoed(w, origin, "/bareecho") == "/echo"
    assert echoed(w, origin, "/old/v1/a/b?k=v") == "/echo/new/a/b/v1?k=v"
    # a rewrite whose regex does not match leaves the path alone
    assert echoed(w, origin, "/old/flat") == "/old/flat"
    assert echoed(w, origin, "/named/a/b") == "/echo/n/a/b$"
    assert echoed(w, origin, "/both/x/y?z") == "/echo/y?z"
    # a group that took no part is empty
    assert echoed(w, origin, "/opt/xy") == "/echo/x-y"
    assert echoed(w, origin, "/opt/yz") == "/echo/-yz"
    # a path without a rewrite goes as it came
    assert echoed(w, origin, "/echo/plain?a=b") == "/echo/plain?a=b"
    # the access log shows the target as forwarded
    lines = wait_until(lambda: (lambda l: l if any("/echo/new/a/b/v1?k=v" in x for x in l) else None)(
        w.access_lines()), slack(3), what="the rewritten target in the access log")
    assert lines


def test_a_rewrite_that_gives_no_path_is_500_and_one_too_long_414(weir_factory, origin):
    w = start(weir_factory, origin, [
        {"path": "/nopath/", "upstream": "a", "extra": 'rewrite = { regex = "^/nopath/(.*)"; replace = "$1"; }; '},
        {"path": "/dots/", "upstream": "a",
         "extra": 'rewrite = { regex = "^/dots/(.*)"; replace = "/echo/$1/.."; }; '},
        {"path": "/long/", "upstream": "a",
         "extra": 'rewrite = { regex = "^/long/(.*)"; replace = "/echo/$1$1$1$1$1$1$1$1"; }; '},
        {"path": "/", "upstream": "a"},
    ])
    before = w.metrics()
    origin.clear_log()
    with Client(w.port) as c:
        assert c.request("GET", "/nopath/x").status == 500
        # the connection goes on after a 500
        assert c.request("GET", "/dots/x").status == 500
        r = c.request("GET", "/long/" + "a" * 600)
        assert r.status == 414 and "close" in r.connection_tokens(), r
    with Client(w.port) as c:
        assert c.request("GET", "/long/ok").status == 200
    assert [e["target"] for e in origin.requests()] == ["/echo/okokokokokokokok"]
    m = wait_until(lambda: (lambda m: m if m.error("rewrite_too_long") - before.error("rewrite_too_long") == 1
                            else None)(w.metrics()), slack(3), what="the counters")
    assert m.error("rewrite_failed") - before.error("rewrite_failed") == 2
    w.logged(lambda l: "rewrite of route" in l)


@pytest.mark.normal_only
def test_a_runaway_regex_gives_up_counted_and_the_worker_stays_cool(weir_factory, origin):
    w = start(weir_factory, origin, [
        route("/r", "redos", 'path_regex = "^/r(a+)+$"; '),
        route("/r", "fallback"),
    ], workers=1)
    before = w.metrics()
    pid = w.wait_workers(1)[0]
    cpu0 = cpu_seconds(pid)
    assert took(w, "/r" + "a" * 20) == "redos"
    evil = "/r" + "a" * 40 + "b"
    for _ in range(20):
        assert took(w, evil) == "fallback"
    used = cpu_seconds(pid) - cpu0
    # backtracking unbounded would take years; the limit, milliseconds
    # PCRE2's own limit (10,000,000) costs about 0.5 s for these 20; ours
    # about 0.01 s
    assert used < 0.25, used
    wait_until(lambda: w.metrics().error("regex_limit") - before.error("regex_limit") == 20, slack(3),
               what="regex_limit counted")


def weir_t(w, text):
    w.write_raw_config(text)
    p = subprocess.run([WEIR_BIN, "-t", "-c", w.conf], capture_output=True, text=True, timeout=slack(10))
    return p.returncode, p.stdout + p.stderr


def test_weir_t_refuses_bad_matchers_with_their_lines(weir_factory, origin):
    cases = [
        ('path_regex = "^/api/(v[0-9]+";', 'routes.path_regex "^/api/(v[0-9]+" does not compile: '
                                           'missing closing parenthesis at offset 14'),
        ('match_headers = ( { name = "X-V"; regex = "a{2,1}"; } );', 'routes.match_headers entry "X-V": regex "a{2,1}" '
                                                                  'does not compile: numbers out of order'),
        ('match_query = ( { name = "v"; regex = "*"; } );', 'does not compile: quantifier does not follow'),
        ('rewrite = { regex = "^/(x"; replace = "/y"; };', 'routes.rewrite.regex "^/(x" does not compile'),
        ('rewrite = { regex = "^/(x)"; replace = "/y/$2"; };', 'names a group number the regex does not have'),
        ('rewrite = { regex = "^/(x)"; replace = "/y/${nope}"; };', 'names a group the regex does not have'),
        ('rewrite = { regex = "^/(x)"; replace = "/y?$1"; };', "no space, control byte, '?'"),
        ('rewrite = { regex = "^/(x)"; };', "routes.rewrite.replace is required"),
        ('methods = [ "get" ];', 'routes.methods entry "get" is not a method'),
        ('methods = [ ];', "routes.methods must name at least one method"),
        ('match_headers = ( { name = "X V"; exact = "1"; } );', 'name "X V" is not a header name'),
        ('match_headers = ( { name = "X-V"; } );', "needs exactly one of exact, prefix, regex or present"),
        ('match_headers = ( { name = "X-V"; exact = "1"; prefix = "1"; } );', "needs exactly one of"),
        ('match_query = ( { name = "a&b"; exact = "1"; } );', "may not hold spaces, control bytes, '&'"),
        ('match_headers = ( { exact = "1"; } );', "routes.match_headers.name is required"),
        ('match_headers = ( { name = "X-V"; exact = "1"; colour = "red"; } );', 'unknown key "colour"'),
        ('strip_prefix = "/zz";', 'routes.strip_prefix "/zz" is not a prefix of the route\'s path "/x"'),
        ('strip_prefix = 3;', "routes.strip_prefix must be a string"),
        ('path_exact = "/y";', "routes.path_exact and routes.path exclude each other"),
        ('path_exact = "y";', 'routes.path_exact "y"'),
        ('path_exact = "/a//b";', 'routes.path_exact "/a//b" never matches: with merge_slashes on'),
    ]
    for keys, message in cases:
        w = weir_factory(start=False, upstreams=[{"name": "a", "servers": [origin.addr]}],
                         routes=[{"path": "/", "upstream": "a"}])
        text = ('listeners = ( { address = "127.0.0.1:%d"; } );\n'
                'upstreams = ( { name = "a"; servers = ( { address = "%s"; } ); } );\n'
                'routes = (\n'
                '  { path = "/"; upstream = "a"; },\n'
                '  { path = "/x"; upstream = "a";\n'
                '    %s }\n'
                ');\n') % (w.port, origin.addr, keys)
        rc, out = weir_t(w, text)
        assert rc != 0, (keys, out)
        assert "%s:6: " % w.conf in out, (keys, out)
        assert message in out, (keys, out)
    # the same path twice is fine with other conditions, not with the same
    text = ('listeners = ( { address = "127.0.0.1:%d"; } );\n'
            'upstreams = ( { name = "a"; servers = ( { address = "%s"; } ); } );\n'
            'routes = (\n'
            '  { path = "/x"; methods = [ "GET" ]; upstream = "a"; },\n'
            '  { path = "/x"; upstream = "a"; },\n'
            '  { path = "/x"; methods = [ "GET" ]; upstream = "a"; }\n'
            ');\n') % (w.port, origin.addr)
    rc, out = weir_t(w, text)
    assert rc != 0 and '%s:6: route for host "*" and path "/x GET" is already defined on line 4' % w.conf in out, out


def test_weir_T_prints_the_matchers_back_as_a_valid_config(weir_factory, origin):
    w = start(weir_factory, origin, [
        {"path": None, "upstream": "a", "extra": 'path_exact = "/x"; '},
        {"path": "/api/", "upstream": "a",
         "extra": 'path_regex = "^/api/v[0-9]+/"; methods = [ "HEAD", "GET" ]; '
                  'match_headers = ( { name = "X-V"; exact = "2"; }, { name = "X-Debug"; present = false; } ); '
                  'match_query = ( { name = "v"; prefix = "2"; } ); strip_prefix = true; '
                  'rewrite = { regex = "^/(.*)"; replace = "/new/$1"; }; '},
        {"path": "/", "upstream": "a"},
    ], start=False)
    dump = subprocess.run([WEIR_BIN, "-T", "-c", w.conf], capture_output=True, text=True, timeout=slack(10))
    assert dump.returncode == 0, dump.stderr
    out = dump.stdout
    assert 'path_exact = "/x";' in out
    assert 'methods = [ "GET", "HEAD" ];' in out
    assert 'match_headers = ( { name = "x-v"; exact = "2"; }, { name = "x-debug"; present = false; } );' in out
    assert 'rewrite = { regex = "^/(.*)"; replace = "/new/$1"; };' in out
    rc, again = weir_t(w, out)
    assert rc == 0, again


def test_reloads_swap_regexes_under_load_without_a_failed_request(weir_factory, origin):
    # odd versions take /v/bN to the origin as /echo/new/bN, even ones
    # /v/aN as /echo/old/aN; the other goes to the plain route
    def routes(version):
        return [
            {"path": "/v/", "upstream": "a",
             "extra": 'path_regex = "^/v/%s[0-9]+$"; rewrite = { regex = "^/v/(.*)"; replace = "/echo/%s/$1"; }; '
                      % (("b", "new") if version % 2 else ("a", "old"))},
            route("/v/", "plain"),
            route("/", "root"),
        ]

    def body(target):
        with Client(w.port) as c:
            r = c.request("GET", target)
        assert r.status == 200, r
        return r.body.decode() if r.body == b"plain" else r.json()["target"]

    w = start(weir_factory, origin, routes(0), workers=2)
    failures, done = [], [0]
    halt = threading.Event()

    def load():
        end = time.monotonic() + 20
        while not halt.is_set() and time.monotonic() < end:
            try:
                with Client(w.port) as c:
                    for i in range(20):
                        r = c.request("GET", "/v/a1" if i % 2 else "/v/b2")
                        if r.status != 200 or (r.body != b"plain" and r.json()["target"] not in (
                                "/echo/old/a1", "/echo/new/b2")):
                            failures.append((r.status, r.body))
                        done[0] += 1
                        if "close" in r.connection_tokens():
                            break
            except Exception as e:  # a cut connection is a failed request
                failures.append(repr(e))

    t = threading.Thread(target=load, daemon=True)
    t.start()
    try:
        for version in range(1, 5):
            before = w.metrics()("weir_reloads_total", result="ok")
            w.write_config(upstreams=[{"name": "a", "servers": [origin.addr]}], routes=routes(version), workers=2)
            w.signal(signal.SIGHUP)
            wait_until(lambda: w.metrics()("weir_reloads_total", result="ok") > before, slack(10), what="reload")
            want = "/echo/new/b2" if version % 2 else "/echo/old/a1"
            probe = "/v/b2" if version % 2 else "/v/a1"
            wait_until(lambda: body(probe) == want, slack(10), what="generation %d's regex" % version)
            assert body("/v/a1" if version % 2 else "/v/b2") == "plain"
            time.sleep(0.5)  # requests in flight across each reload
    finally:
        halt.set()
        t.join(timeout=30)
    assert done[0] > 50, done
    assert failures == [], failures[:10]


def test_auth_follows_the_route_among_routes_of_one_path(weir_factory, origin, tmp_path):
    # auth's policies are found by the route's label, not its path alone:
    # the writes of /echo/p take bob's key, its reads alice's
    kr, kw = tmp_path / "readers", tmp_path / "writers"
    kr.write_text("alice %s\n" % hashlib.sha256(b"alice-key-0123456789").hexdigest())
    kw.write_text("bob %s\n" % hashlib.sha256(b"bob-key-0123456789").hexdigest())
    w = start(weir_factory, origin, [
        {"path": "/echo/p", "upstream": "a",
         "extra": 'methods = [ "POST", "PUT" ]; auth = { type = "api_key"; keys_file = "%s"; }; ' % kw},
        {"path": "/echo/p", "upstream": "a", "extra": 'auth = { type = "api_key"; keys_file = "%s"; }; ' % kr},
    ])
    alice, bob = [("X-Api-Key", "alice-key-0123456789")], [("X-Api-Key", "bob-key-0123456789")]
    # (a 401 with a body unread closes: a connection each)
    assert w.get("/echo/p", headers=alice).status == 200
    assert w.get("/echo/p", headers=bob).status == 401
    assert w.get("/echo/p", method="POST", body=b"x", headers=bob).status == 200
    assert w.get("/echo/p", method="POST", body=b"x", headers=alice).status == 401
    assert w.get("/echo/p", method="DELETE", headers=alice).status == 200
