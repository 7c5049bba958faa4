#!/usr/bin/env python3
"""compress.py: response compression, MB/s per core at each level, weir
against nginx's gzip.

A 1 MiB text body (the origin's text_body(1 MiB): words, about 3.5x for
gzip) is served by an nginx without compression; weir (one worker)
proxies it with compress = { gzip_level = L; } or brotli_level = L, and
a second nginx (one process) serves the same file with gzip on at
gzip_comp_level L. For each level, requests are made one at a time for
at most 4 s (at least 3 requests), and the figure is the body's bytes
per second of CPU (utime + stime from /proc) the compressing process
spent: uncompressed MB per core-second, and the ratio.

    tests/bench/compress.py [--quick]   (loopback only; --quick: gzip 1,
                                         5, 9 and brotli 1, 4, 6)

WEIR_BIN names another weir binary (default build/weir).
"""
import http.client, os, shutil, socket, subprocess, sys, tempfile, time

import benchlib
from benchlib import wait_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "origin"))
from origin import text_body  # noqa: E402

W = tempfile.mkdtemp(prefix="weir-compress.")
WEIR_BIN = os.environ.get("WEIR_BIN", os.path.join(ROOT, "build", "weir"))
N = 1 << 20
SECONDS = 4.0


def port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def nginx(name, p, gzip_level=None):
    conf = benchlib.write(W, name + ".conf", """
daemon off; master_process off; worker_processes 1; error_log %s/%s.err; pid %s/%s.pid;
events { worker_connections 64; }
http {
  access_log off; types { text/html html; } default_type text/html;
  server { listen 127.0.0.1:%d; root %s; %s }
}
""" % (W, name, W, name, p, W, "gzip on; gzip_comp_level %d; gzip_types text/html; gzip_min_length 0;"
       % gzip_level if gzip_level else ""))
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", W], stderr=subprocess.DEVNULL)
    wait_port(p)
    return proc


def weir(p, origin_port, block):
    stats = port()
    conf = benchlib.write(W, "weir.conf", """
workers = 1;
log = { error = "%s/weir.err"; access = "off"; };
stats = { listen = "127.0.0.1:%d"; };
listeners = ( { address = "127.0.0.1:%d"; } );
upstreams = ( { name = "o"; servers = ( { address = "127.0.0.1:%d"; } ); } );
routes = ( { path = "/"; upstream = "o"; } );
compress = { %s };
""" % (W, stats, p, origin_port, block))
    proc = subprocess.Popen([WEIR_BIN, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(p)
    time.sleep(0.3)
    kids = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    return proc, int(kids[0])


def measure(p, pid, ae):
    c = http.client.HTTPConnection("127.0.0.1", p, timeout=30)
    c.request("GET", "/body.html", headers={"Accept-Encoding": ae})
    r = c.getresponse()
    r.read()  # one warm-up: the encoder's pool and the page cache touched
    n, out, t0, c0 = 0, 0, time.monotonic(), cpu_s(pid)
    while n < 3 or time.monotonic() - t0 < SECONDS:
        c.request("GET", "/body.html", headers={"Accept-Encoding": ae})
        r = c.getresponse()
        body = r.read()
        assert r.getheader("Content-Encoding") == ae, r.getheaders()
        out += len(body)
        n += 1
        if time.monotonic() - t0 > 20:
            break
    cpu = cpu_s(pid) - c0
    c.close()
    return n * N / 1e6 / cpu if cpu > 0 else float("inf"), n * N / out


def main():
    quick = "--quick" in sys.argv
    with open(os.path.join(W, "body.html"), "wb") as f:
        f.write(text_body(N))
    op, np_ = port(), port()
    plain = nginx("origin", op)
    rows = []
    try:
        for level in ((1, 5, 9) if quick else range(1, 10)):
            wp = port()
            w, wpid = weir(wp, op, "gzip_level = %d;" % level)
            mbs, ratio = measure(wp, wpid, "gzip")
            w.terminate()
            w.wait()
            ng = nginx("gzip", np_, level)
            nmbs, nratio = measure(np_, ng.pid, "gzip")
            ng.terminate()
            ng.wait()
            rows.append(("gzip", level, mbs, ratio, "%.1f" % nmbs, "%.2f" % nratio))
        for level in ((1, 4, 6) if quick else range(0, 12)):
            wp = port()
            w, wpid = weir(wp, op, "brotli_level = %d;" % level)
            mbs, ratio = measure(wp, wpid, "br")
            w.terminate()
            w.wait()
            rows.append(("br", level, mbs, ratio, "-", "-"))
    finally:
        plain.terminate()
        plain.wait()
        shutil.rmtree(W, ignore_errors=True)
    print("| encoding | level | weir MB/s per core | weir ratio | nginx MB/s per core | nginx ratio |")
    print("|---|---|---|---|---|---|")
    for enc, level, mbs, ratio, nmbs, nratio in rows:
        print("| %s | %d | %.1f | %.2f | %s | %s |" % (enc, level, mbs, ratio, nmbs, nratio))


if __name__ == "__main__":
    main()
