#!/usr/bin/python3
"""auth.py: instructions per request of routes.auth, under callgrind.

One weir worker (master_process = false) runs under valgrind's callgrind in
front of an nginx origin; a keep-alive client sends N requests to each of:
a route without auth, an API key route, a JWT (ES256) route with one token
repeated (cached after the first), and the JWT route with a new token each
time (never cached). Counters are zeroed before and dumped after each run
(callgrind_control), so a run's instructions are those of its N requests
alone: instructions per request is their total over N, and the cost of a
check is its row less the plain route's with the same header (the token
or key is then parsed and forwarded in both).

    /usr/bin/python3 tests/bench/auth.py [--requests N] [--weir build/weir] [--keep]

Needs valgrind, nginx, python3-jwt and python3-cryptography. Loopback only;
every run is bounded by N (default 2000) and a 120 s timeout.
"""
import argparse, glob, hashlib, os, re, shutil, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import wait_port, write  # noqa: E402

import jwt  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402

WEIR_PORT, ORIGIN_PORT, STATS_PORT = 18180, 19180, 18190
KEY = "bench-api-key-0123456789"


def request(sock, path, headers):
    hs = "".join("%s: %s\r\n" % kv for kv in headers)
    sock.sendall(("GET %s HTTP/1.1\r\nHost: bench\r\n%s\r\n" % (path, hs)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, rest = buf.split(b"\r\n\r\n", 1)
    status = int(head.split()[1])
    n = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(rest) < n:
        rest += sock.recv(65536)
    return status


def run(pid, out_dir, name, reqs):
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True, timeout=60)
    s = socket.create_connection(("127.0.0.1", WEIR_PORT))
    for path, headers in reqs:
        st = request(s, path, headers)
        if st != 200:
            raise SystemExit("%s: %s answered %d" % (name, path, st))
    s.close()
    time.sleep(0.2)
    before = set(glob.glob(os.path.join(out_dir, "callgrind.out*")))
    subprocess.run(["callgrind_control", "-d", name, str(pid)], check=True, capture_output=True, timeout=60)
    for _ in range(100):
        new = set(glob.glob(os.path.join(out_dir, "callgrind.out*"))) - before
        if new:
            break
        time.sleep(0.1)
    f = max(new, key=os.path.getmtime)
    time.sleep(0.2)
    text = open(f).read()
    m = re.search(r"^summary: (\d+)", text, re.M) or re.search(r"^totals: (\d+)", text, re.M)
    return int(m.group(1)) / len(reqs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--weir", default="build/weir")
    ap.add_argument("--keep", action="store_true", help="keep the callgrind dumps (for callgrind_annotate)")
    a = ap.parse_args()
    a.weir = os.path.abspath(a.weir)
    for tool in ("valgrind", "callgrind_control", "nginx"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            raise SystemExit("needs " + tool)
    d = tempfile.mkdtemp(prefix="weir-auth-bench-")
    key = ec.generate_private_key(ec.SECP256R1())
    write(d, "es.pem", key.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo).decode())
    write(d, "keys", "bench %s\n" % hashlib.sha256(KEY.encode()).hexdigest())
    ngx = write(d, "nginx.conf", """daemon off; master_process off; worker_processes 1;
error_log %s/nginx.err; pid %s/nginx.pid;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;
uwsgi_temp_path %s; scgi_temp_path %s; keepalive_requests 1000000;
server { listen 127.0.0.1:%d; location / { return 200 "hello\\n"; } } }
""" % ((d,) * 7 + (ORIGIN_PORT,)))
    conf = write(d, "weir.conf", """workers = 1; master_process = false;
stats = { listen = "127.0.0.1:%d"; };
log = { error = "%s/weir.err"; access = "off"; level = "notice"; };
listeners = ( { address = "127.0.0.1:%d"; } );
upstreams = ( { name = "o"; keepalive = 16; servers = ( { address = "127.0.0.1:%d"; } ); } );
routes = (
  { path = "/plain"; upstream = "o"; },
  { path = "/key"; upstream = "o"; auth = { type = "api_key"; keys_file = "%s/keys"; consumer_header = "X-Consumer"; }; },
  { path = "/jwt"; upstream = "o"; auth = { type = "jwt"; keys = [ "%s/es.pem" ]; consumer_header = "X-Consumer"; }; }
);
""" % (STATS_PORT, d, WEIR_PORT, ORIGIN_PORT, d, d))
    origin = subprocess.Popen([shutil.which("nginx") or "/usr/sbin/nginx", "-c", ngx, "-p", d],
                              stderr=subprocess.DEVNULL)
    w = subprocess.Popen(["valgrind", "--tool=callgrind",
                          "--callgrind-out-file=%s/callgrind.out.%%p" % d, a.weir, "-c", conf],
                         cwd=d, stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "valgrind.err"), "w"))
    try:
        wait_port(ORIGIN_PORT)
        wait_port(WEIR_PORT, 60)
        n = a.requests
        exp = int(time.time()) + 3600
        tok = jwt.encode({"sub": "bench", "exp": exp}, key, algorithm="ES256", headers={"kid": "es"})
        fresh = [jwt.encode({"sub": "bench", "exp": exp, "jti": i}, key, algorithm="ES256", headers={"kid": "es"})
                 for i in range(n)]
        # a warm-up of each kind, so first-use costs are not counted
        run(w.pid, d, "warmup", [("/plain", [])] * 50 + [("/key", [("X-Api-Key", KEY)])] * 50 +
            [("/jwt", [("Authorization", "Bearer " + tok)])] * 50)
        # each check against the plain route sent the same header, so that
        # the row is the check's cost, not that of a longer request
        kh = [("X-Api-Key", KEY)]
        jh = [("Authorization", "Bearer " + tok)]
        rows = [
            ("plain route", None, run(w.pid, d, "plain", [("/plain", [])] * n)),
            ("plain + X-Api-Key", None, run(w.pid, d, "plain-key", [("/plain", kh)] * n)),
            ("API key", 1, run(w.pid, d, "key", [("/key", kh)] * n)),
            ("plain + Bearer", None, run(w.pid, d, "plain-jwt", [("/plain", jh)] * n)),
            ("JWT ES256, cached", 3, run(w.pid, d, "jwt-cached", [("/jwt", jh)] * n)),
            ("JWT ES256, uncached", 3, run(w.pid, d, "jwt-fresh", [("/jwt", [("Authorization", "Bearer " + t)])
                                                                      for t in fresh])),
        ]
    finally:
        w.terminate()
        origin.terminate()
        w.wait(timeout=60)
        origin.wait(timeout=10)
    print("%-22s %14s %14s %22s" % ("%d requests each" % n, "instr/request", "over plain",
                                     "over plain, same header"))
    for name, same, ir in rows:
        print("%-22s %14.0f %14.0f %22s" % (name, ir, ir - rows[0][2],
                                           "%.0f" % (ir - rows[same][2]) if same else ""))
    if a.keep:
        print("dumps in", d)
    else:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
