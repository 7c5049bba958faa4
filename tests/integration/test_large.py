"""1 GiB through weir each way with bounded worker memory, over HTTP/1.1
and over HTTP/2 (h2c) (skipped with WEIR_QUICK=1)."""

import hashlib
import json
import shutil
import subprocess
import time

import pytest

from harness import build_request, proc_status, simple, slack

GIB = 1 << 30
MIB = 1 << 20
RSS_LIMIT_KB = 64 * 1024
CURL = shutil.which("curl") or "/usr/bin/curl"

pytestmark = pytest.mark.large


def peak_rss_kb(w):
    pids = w.worker_pids()
    assert pids, "no workers"
    return {p: proc_status(p, "VmHWM") for p in pids}


def test_a_1gib_download_streams_through_with_worker_memory_under_64mib(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"upstream_read": "30s"})
    got = [0, 0]  # bytes, bytes that are not 'x'

    def sink(b):
        got[0] += len(b)
        got[1] += len(b) - bytes(b).count(b"x")

    t = time.monotonic()
    with w.client(timeout=60) as c:
        c.send(build_request("GET", "/big/%d" % GIB))
        r = c.read_response(sink=sink, timeout=300)
        assert r.status == 200
        assert r.get("Content-Length") == str(GIB)
        # the connection is still good afterwards
        assert c.request("GET", "/bytes/3").body == b"xxx"
    assert got == [GIB, 0]
    assert time.monotonic() - t < slack(300)
    peaks = peak_rss_kb(w)
    assert all(v is not None and v < RSS_LIMIT_KB for v in peaks.values()), peaks


def test_a_1gib_upload_streams_through_with_worker_memory_under_64mib(weir_factory, origin):
    w = simple(weir_factory, origin, timeouts={"upstream_read": "60s", "client_body": "30s"},
               limits={"body_size": "2g"})
    block = b"x" * MIB
    sha = hashlib.sha256()
    for _ in range(GIB // MIB):
        sha.update(block)
    t = time.monotonic()
    with w.client(timeout=60) as c:
        c.send(build_request("POST", "/upload", headers=[("Content-Length", str(GIB))]))
        for _ in range(GIB // MIB):
            c.sock.sendall(block)
        r = c.read_response(timeout=120)
    assert r.status == 200, r
    assert r.json() == {"body_len": GIB, "body_sha256": sha.hexdigest()}
    assert time.monotonic() - t < slack(300)
    peaks = peak_rss_kb(w)
    assert all(v is not None and v < RSS_LIMIT_KB for v in peaks.values()), peaks


def test_a_1gib_download_over_h2c_streams_through_with_worker_memory_under_64mib(weir_factory, origin):
    # curl over HTTP/2 with prior knowledge: one stream, weir's per-stream
    # buffer and the client's window the only room the body gets
    w = simple(weir_factory, origin, timeouts={"upstream_read": "30s"})
    p = subprocess.Popen([CURL, "-sS", "--http2-prior-knowledge", "-o", "-", "-w", "%{stderr}%{http_code} %{http_version}",
                          "http://127.0.0.1:%d/big/%d" % (w.port, GIB)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    n = bad = 0
    while True:
        b = p.stdout.read(MIB)
        if not b:
            break
        n += len(b)
        bad += len(b) - b.count(b"x")
    err = p.stderr.read().decode()
    assert p.wait(slack(300)) == 0, err
    assert err.split() == ["200", "2"], err
    assert (n, bad) == (GIB, 0)
    peaks = peak_rss_kb(w)
    assert all(v is not None and v < RSS_LIMIT_KB for v in peaks.values()), peaks


def test_a_1gib_upload_over_h2c_streams_through_with_worker_memory_under_64mib(weir_factory, origin, tmp_path):
    w = simple(weir_factory, origin, timeouts={"upstream_read": "60s", "client_body": "30s"},
               limits={"body_size": "2g"})
    f = tmp_path / "gib"
    with open(f, "wb") as out:
        out.truncate(GIB)  # a sparse GiB of zeros: read fast, hashed the same
    sha = hashlib.sha256()
    zeros = bytes(MIB)
    for _ in range(GIB // MIB):
        sha.update(zeros)
    # -T streams the file (--data-binary would read it into memory first)
    out = subprocess.run([CURL, "-sS", "--http2-prior-knowledge", "-X", "POST", "-T", str(f),
                          "-w", "\n%{http_code} %{http_version}", "http://127.0.0.1:%d/upload" % w.port],
                         capture_output=True, timeout=slack(300))
    body, tail = out.stdout.rsplit(b"\n", 1)
    assert tail.split() == [b"200", b"2"], out
    assert json.loads(body) == {"body_len": GIB, "body_sha256": sha.hexdigest()}
    peaks = peak_rss_kb(w)
    assert all(v is not None and v < RSS_LIMIT_KB for v in peaks.values()), peaks
