"""A worker out of file descriptors: accept() fails with EMFILE while the
connection stays queued, so the listening socket stays readable. The worker
must neither spin on it nor write a log line per attempt, and must accept
the queued clients once descriptors are free again. (Found by the chaos
suite, tests/chaos: fd-exhaustion.)"""

import os
import resource
import socket
import time

from harness import proc_stat, simple, slack, wait_until


def cpu_seconds(pid):
    st = proc_stat(pid)
    return (int(st[11]) + int(st[12])) / float(os.sysconf("SC_CLK_TCK"))


def test_a_worker_out_of_fds_neither_spins_nor_floods_the_log_and_recovers(weir_factory, origin):
    # idle clients must not be timed out while the test holds them
    w = simple(weir_factory, origin, workers=1, timeouts={"client_header": "30s"})
    [pid] = w.wait_workers(1)
    # the worker alone gets a small open files limit: about 20 client
    # connections fill it, the rest wait in the kernel's accept queue
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (32, 32))
    held = []
    try:
        for _ in range(60):
            held.append(socket.create_connection(("127.0.0.1", w.port), timeout=2))
        wait_until(lambda: w.metrics()("weir_client_connections_active") >= 15, slack(3),
                   what="the worker to fill its fds")
        t0, c0 = time.monotonic(), cpu_seconds(pid)
        time.sleep(slack(1.5))
        busy = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
        lines = [l for l in w.error_lines() if "Too many open files" in l]
        assert 1 <= len(lines) <= 2 + 2 * slack(1.5), "%d EMFILE log lines in 1.5 s" % len(lines)
        assert busy < 0.3, "worker used %.0f%% of a CPU while out of fds" % (busy * 100)
        # a client queued while it was out of fds is served once they are freed
        for s in held[:-1]:
            s.close()
        s = held[-1]
        s.settimeout(slack(3))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            b = s.recv(4096)
            assert b, "closed without an answer: %r" % data
            data += b
        assert data.startswith(b"HTTP/1.1 200 "), data[:100]
    finally:
        for s in held:
            s.close()
    assert w.proc.poll() is None
