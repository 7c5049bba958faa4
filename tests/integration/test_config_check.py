"""`weir -t -c FILE`: exit 0 for a good config; exit 1 with FILE:LINE:
messages for a bad one. And weir refuses to start on a bad config."""

import os
import re
import socket
import subprocess

import pytest

from harness import WEIR_BIN, free_port, render_config, slack

def good_text(d, port=None, stats=None, **kw):
    args = dict(upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]}],
                routes=[{"path": "/", "upstream": "a"}])
    args.update(kw)
    return render_config(d, port or free_port(), stats or free_port(), **args)


def check(tmp_path, text, name="weir.conf"):
    if not os.path.exists(WEIR_BIN):
        pytest.fail("%s does not exist: run make (or set WEIR_BIN)" % WEIR_BIN)
    p = tmp_path / name
    p.write_text(text)
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(p)], capture_output=True,
                       timeout=slack(10), cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"), str(p)


def line_of(text, needle):
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError("%r not in config" % needle)


def assert_error_at(stderr, path, line):
    pat = re.compile(r"^%s:%d: \S" % (re.escape(path), line), re.M)
    assert pat.search(stderr), "no '%s:%d: ...' line in stderr:\n%s" % (path, line, stderr)


def test_a_good_config_checks_with_exit_0(tmp_path):
    rc, out, err, _ = check(tmp_path, good_text(tmp_path))
    assert rc == 0, (out, err)


def test_the_example_config_in_etc_checks_with_exit_0(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    conf = os.path.join(here, "..", "..", "etc", "weir.conf")
    if not os.path.exists(conf):
        pytest.fail("etc/weir.conf is missing")
    rc, out, err, _ = check(tmp_path, open(conf).read())
    assert rc == 0, (out, err)


def test_checking_does_not_bind_the_listener(tmp_path):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        rc, out, err, _ = check(tmp_path, good_text(tmp_path, port=port))
        assert rc == 0, (out, err)
    finally:
        s.close()


def test_a_syntax_error_is_reported_with_file_and_line(tmp_path):
    text = good_text(tmp_path) + "oops = ;\n"
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    assert_error_at(err, p, line_of(text, "oops"))


def test_a_route_to_an_unknown_upstream_is_reported_at_the_route_line(tmp_path):
    text = good_text(tmp_path, routes=[{"path": "/", "upstream": "a"},
                                       {"path": "/x/", "upstream": "nosuch"}])
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    assert_error_at(err, p, line_of(text, "nosuch"))
    assert "nosuch" in err


def test_a_bad_duration_is_reported(tmp_path):
    text = good_text(tmp_path, timeouts={"client_header": "5 parsecs"})
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    assert_error_at(err, p, line_of(text, "parsecs"))


def test_a_bad_size_is_reported(tmp_path):
    text = good_text(tmp_path, limits={"body_size": "12q"})
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    assert_error_at(err, p, line_of(text, "12q"))


def test_a_bad_listen_address_is_reported(tmp_path):
    text = good_text(tmp_path).replace('address = "127.0.0.1:', 'address = "999.0.0.1:', 1)
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    assert_error_at(err, p, line_of(text, "999.0.0.1"))


@pytest.mark.parametrize("weight", [0, 1001, -1])
def test_a_server_weight_out_of_range_is_reported(tmp_path, weight):
    text = good_text(tmp_path, upstreams=[{"name": "a", "servers": [("127.0.0.1:9", weight)]}])
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    assert_error_at(err, p, line_of(text, "weight = %d" % weight))


@pytest.mark.parametrize("key,value,needle", [("max_fails", -1, "max_fails = -1"),
                                               ("max_fails", 1001, "max_fails = 1001"),
                                               ("fail_timeout", "ten", 'fail_timeout = "ten"'),
                                               ("fail_timeout", "0s", 'fail_timeout = "0s"')])
def test_a_bad_max_fails_or_fail_timeout_is_reported(tmp_path, key, value, needle):
    text = good_text(tmp_path, upstreams=[{"name": "a", "servers": ["127.0.0.1:9"], key: value}])
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1, (out, err)
    assert_error_at(err, p, line_of(text, needle))
    assert "upstreams." + key in err


def test_max_fails_0_and_a_fail_timeout_check(tmp_path):
    text = good_text(tmp_path, upstreams=[{"name": "a", "servers": ["127.0.0.1:9"], "max_fails": 0,
                                           "fail_timeout": "30s"}])
    rc, out, err, _ = check(tmp_path, text)
    assert rc == 0, (out, err)


def test_an_upstream_without_servers_is_reported(tmp_path):
    text = good_text(tmp_path).replace('servers = ( { address = "127.0.0.1:9"; } )', "servers = ( )")
    assert "servers = ( )" in text
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    assert p + ":" in err


def test_a_config_without_listeners_is_reported(tmp_path):
    text = "\n".join(l for l in good_text(tmp_path).splitlines() if not l.startswith("listeners"))
    rc, out, err, p = check(tmp_path, text + "\n")
    assert rc == 1
    assert p + ":" in err


def test_every_error_in_a_file_is_reported_not_only_the_first(tmp_path):
    text = good_text(tmp_path, routes=[{"path": "/", "upstream": "nosuch1"},
                                       {"path": "/b/", "upstream": "nosuch2"}],
                     timeouts={"drain": "later"})
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    for needle in ("nosuch1", "nosuch2", "later"):
        assert_error_at(err, p, line_of(text, needle))


def test_duplicate_upstream_names_are_reported(tmp_path):
    text = good_text(tmp_path, upstreams=[{"name": "a", "servers": ["127.0.0.1:9"]},
                                          {"name": "a", "servers": ["127.0.0.1:10"]}])
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1
    assert p + ":" in err


def test_a_missing_config_file_is_an_error(tmp_path):
    r = subprocess.run([WEIR_BIN, "-t", "-c", str(tmp_path / "nope.conf")], capture_output=True,
                       timeout=slack(10))
    assert r.returncode != 0
    assert b"nope.conf" in r.stderr


def test_weir_refuses_to_start_on_a_bad_config_and_binds_nothing(tmp_path):
    port = free_port()
    text = good_text(tmp_path, port=port, routes=[{"path": "/", "upstream": "nosuch"}])
    p = tmp_path / "bad.conf"
    p.write_text(text)
    proc = subprocess.Popen([WEIR_BIN, "-c", str(p)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=slack(5))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        pytest.fail("weir kept running on a bad config")
    assert proc.returncode != 0
    assert b"nosuch" in err
    s = socket.socket()
    try:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    finally:
        s.close()


@pytest.mark.parametrize("group,key,value", [
    ("limits", "body_buffer", "2m"),          # past the 1 MiB bound
    ("limits", "stream_buffer", "2m"),        # past the 1 MiB bound
    ("limits", "client_body_rate", "fast"),
    ("limits", "client_send_rate", -1),
    ("timeouts", "rate_window", "20 parsecs"),
    ("timeouts", "request", "soon"),
])
def test_a_bad_buffering_or_rate_value_is_reported(tmp_path, group, key, value):
    text = good_text(tmp_path, **{group: {key: value}})
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1, err
    assert_error_at(err, p, line_of(text, key))
    assert key in err


@pytest.mark.parametrize("group,key,value", [
    ("limits", "body_buffer", 0), ("limits", "client_body_rate", 0), ("timeouts", "rate_window", 0),
    ("timeouts", "request", "off"), ("timeouts", "request", "30s"), ("limits", "body_buffer", "1m"),
    ("limits", "stream_buffer", 0), ("limits", "stream_buffer", "1m"),
])
def test_buffering_and_rate_keys_take_their_off_and_edge_values(tmp_path, group, key, value):
    rc, out, err, p = check(tmp_path, good_text(tmp_path, **{group: {key: value}}))
    assert rc == 0, err


# A route whose path no request can have once weir has normalised it
# (worker/http_path.c) would silently never match: `weir -t` refuses it at
# the route's line and says what to write instead. In the file a backslash
# is written "\\" (libconfig escapes).
@pytest.mark.parametrize("path,hint", [
    ("/a/../b", "normalised"),            # dot segments are resolved
    ("/%41pi/", "normalised"),            # %41 is "A", decoded
    ("//x", 'write "/x"'),                # merge_slashes is on by default
    ("/a//b/", 'write "/a/b/"'),
    ("/a\\\\b", "refused"),               # a backslash is a 400
    ("/a%5Cb", "refused"),
    ("/a/..;/b", "refused"),              # "..;" is ".." to Tomcat: a 400
    ("/a/.;x/", "refused"),
    ("/a/..%3Bx", "refused"),
])
def test_a_route_path_no_normalised_request_path_has_is_refused(tmp_path, path, hint):
    text = good_text(tmp_path, routes=[{"path": "/", "upstream": "a"}, {"path": path, "upstream": "a"}])
    rc, out, err, p = check(tmp_path, text)
    assert rc == 1, err
    assert_error_at(err, p, line_of(text, path))
    assert "never matches" in err and hint in err, err


@pytest.mark.parametrize("path,extra", [
    ("//x", "merge_slashes = false;"),    # empty segments kept: "//x" can arrive
    ("/a;jsessionid=1/", ""),             # parameters on a name pass as sent
    ("/..x/", ""), ("/a/.", ""), ("/a/..", ""), ("/a%5", ""), ("/a/.%3", ""),
])
def test_a_route_path_a_normalised_request_path_can_have_is_accepted(tmp_path, path, extra):
    text = good_text(tmp_path, routes=[{"path": path, "upstream": "a"}], extra=extra)
    rc, out, err, p = check(tmp_path, text)
    assert rc == 0, err
