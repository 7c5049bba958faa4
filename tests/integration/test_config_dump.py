"""`weir -T -c FILE`: checks FILE as -t does, then prints the configuration
in force (every default filled in, stats.admin_token masked) on stdout, in
a form `weir -t` accepts and that loads to the same configuration again."""

import os
import re
import subprocess

import pytest

import pki
from harness import WEIR_BIN, slack

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "s3cr3t-T0ken-0123456789abcdef"


def weir(*args, cwd):
    if not os.path.exists(WEIR_BIN):
        pytest.fail("%s does not exist: run make (or set WEIR_BIN)" % WEIR_BIN)
    r = subprocess.run([WEIR_BIN] + list(args), capture_output=True, timeout=slack(10), cwd=str(cwd),
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def dump(tmp_path, text, name="in.conf"):
    p = tmp_path / name
    p.write_text(text)
    rc, out, err = weir("-T", "-c", str(p), cwd=tmp_path)
    assert rc == 0, err
    assert "is valid" in err and "is valid" not in out, "the verdict goes to stderr, the file to stdout"
    return out


def full_config(d):
    """Every kind of key there is: TLS listener with SNI certificates and
    client certificates, TLS upstream, unix stats socket, a token, a
    quote in a path."""
    pki.make_ca(d)
    cert, key = pki.make_leaf(d, "leaf", "/CN=app.test", ext=[pki.san("app.test")])
    cert2, key2 = pki.make_leaf(d, "other", "/CN=other.test", ext=[pki.san("other.test")])
    return """
workers = 3;
pid_file = "%(d)s/weir.pid";
log = { error = "%(d)s/err\\"or.log"; access = "off"; level = "warn"; format = "$client_ip \\"$request\\" $$ ${status}x"; };
trusted_proxies = [ "10.0.0.0/8", "2001:db8::/32", "192.0.2.1" ];
real_ip_depth = 3;
request_id = true;
stats = { listen = "127.0.0.1:19901"; unix = "%(d)s/stats.sock"; mode = "0600"; admin_token = "%(tok)s"; };
listeners = (
  { address = "127.0.0.1:18080"; backlog = 100; },
  { address = "[::1]:18443"; proxy_protocol = true;
    tls = { certificates = ( { cert = "%(c)s"; key = "%(k)s"; }, { cert = "%(c2)s"; key = "%(k2)s"; } );
            client_ca = "%(d)s/ca.pem"; client_verify = "optional"; client_header = "X-Client-Subject";
            early_data = true; session_tickets = 3; }; }
);
upstreams = (
  { name = "a"; keepalive = 0; servers = ( { address = "127.0.0.1:9001"; weight = 3; }, { address = "127.0.0.1:9002"; } ); },
  { name = "b"; tls = { ca = "%(d)s/ca.pem"; sni = "app.test"; }; servers = ( { address = "[::1]:9443"; } ); },
  { name = "c"; proxy_protocol = "v2"; servers = ( { address = "127.0.0.1:9003"; } ); }
);
routes = (
  { host = "*.example.com"; path = "/api"; upstream = "b"; upgrade = [ "WebSocket", "x-chat/2" ]; },
  { host = "Exact.Example.com"; path = "/"; upstream = "a"; upgrade = [ ]; },
  { path = "/"; upstream = "a"; },
  { path = "/old"; return = { status = 308; location = "https://$host/new$request_uri"; }; log = false; },
  { path = "/health"; return = { status = 200; body = "ok \\"$$\\"\\n$arg_x\\t"; content_type = "text/x; q=1"; }; log_sample = "0.25"; },
  { path = "/c"; upstream = "c"; }
);
timeouts = { client_header = "1500ms"; drain = "2m"; upstream_read = 90000; proxy_protocol = "3s"; tunnel = "90m"; tunnel_drain = 1000; };
limits = { body_size = 0; uri_size = "1k"; headers = 50; };
tls_ticket_rotate = "1h";
""" % dict(d=d, tok=TOKEN, c=cert, k=key, c2=cert2, k2=key2)


def test_dump_of_the_example_config_has_every_key_it_sets(tmp_path):
    src = open(os.path.join(HERE, "..", "..", "etc", "weir.conf")).read()
    out = dump(tmp_path, src)
    # every key etc/weir.conf names (commented-out ones too: those are the
    # optional keys) is in the dump, or -T has fallen behind the loader
    keys = set(re.findall(r"(?m)^\s*#?\s*([a-z_]+)\s*=", src))
    # written only when set (a health block only on a group that has one)
    optional = {"unix", "mode", "admin_token", "health", "interval"}
    missing = sorted(k for k in keys - optional if not re.search(r"(?m)^\s*\{?\s*%s = " % k, out)
                     and "%s = " % k not in out)
    assert not missing, out
    # defaults are filled in, as values of the running weir
    assert 'tls_ticket_rotate = "12h";' in out and "master_process = true;" in out
    assert re.search(r"(?m)^workers = \d+;$", out), "\"auto\" is resolved to a number"


def test_dump_is_accepted_by_t_and_is_a_fixed_point(tmp_path):
    d = str(tmp_path)
    out = dump(tmp_path, full_config(d))
    p = tmp_path / "dumped.conf"
    p.write_text(out)
    rc, o, err = weir("-t", "-c", str(p), cwd=tmp_path)
    assert rc == 0, (err, out)
    again = dump(tmp_path, out, name="dumped.conf")
    # the same configuration comes back, but for the file it was read from
    # and the token, which the first dump did not write
    def body(text):
        return [l for l in text.splitlines()[1:] if "admin_token" not in l]
    assert body(again) == body(out)
    for want in ('client_header = "1500ms";', 'drain = "2m";', 'upstream_read = "90s";', 'body_size = "0";',
                 'uri_size = "1k";', "headers = 50;", 'client_verify = "optional";', "early_data = true;", "session_tickets = 3;",
                 'host = "*.example.com"; path = "/api"; upstream = "b";', 'host = "exact.example.com";',
                 '{ host = "*"; path = "/"; upstream = "a"; log = true; log_sample = "1"; abort_on_client_close = true; upgrade = [ "websocket" ]; }',
                 'upgrade = [ "websocket", "x-chat/2" ];', 'upgrade = []; }', 'tunnel = "90m";',
                 'tunnel_drain = "1s";', 'mode = "0600";', "keepalive = 0;",
                 '{ address = "127.0.0.1:9002"; weight = 1; }', 'address = "[::1]:18443";', "verify = true;",
                 'sni = "app.test";', 'access = "off";', 'level = "warn";', 'err\\"or.log"', "workers = 3;",
                 'tls_ticket_rotate = "1h";', 'proxy_protocol = "3s";', "proxy_protocol = false;",
                 "proxy_protocol = true;", "max_fails = 3;", 'fail_timeout = "10s";',
                 'format = "$client_ip \\"$request\\" $$ ${status}x";',
                 'trusted_proxies = [ "10.0.0.0/8", "2001:db8::/32", "192.0.2.1/32" ];', "real_ip_depth = 3;",
                 "request_id = true;", 'proxy_protocol = "v2";', 'proxy_protocol = "off";',
                 'return = { status = 308; location = "https://${host}/new${request_uri}"; content_type = ',
                 'log = false;', 'log_sample = "0.2500";', 'content_type = "text/x; q=1"; };'):
        assert want in out, (want, out)


def test_dump_masks_the_admin_token_but_names_key_files(tmp_path):
    d = str(tmp_path)
    out = dump(tmp_path, full_config(d))
    assert TOKEN not in out
    assert "admin_token is set: masked" in out
    assert not re.search(r"(?m)^\s*admin_token\s*=", out)
    # key paths are shown, their contents never
    assert os.path.join(d, "leaf.key") in out
    assert "PRIVATE KEY" not in out and "CERTIFICATE" not in out


def test_dump_of_a_bad_config_prints_nothing_and_fails(tmp_path):
    p = tmp_path / "bad.conf"
    p.write_text('workers = 0;\nlistners = 1;\n')
    rc, out, err = weir("-T", "-c", str(p), cwd=tmp_path)
    assert rc == 1 and out == "", (rc, out)
    assert re.search(r"bad\.conf:1: ", err), err
