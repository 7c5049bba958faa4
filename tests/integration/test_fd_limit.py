"""A worker at its open files limit: accept4 fails with EMFILE while
connections wait in the backlog. weir must pause accepting (not spin on a
readable socket), log a few lines with a count, count the failures, and
accept again once descriptors are free."""

import socket
import time

from harness import fetch_metrics, proc_stat, simple, slack, wait_until

CLK_TCK = 100  # /proc/PID/stat utime and stime unit on Linux


def cpu_seconds(pid):
    f = proc_stat(pid)
    # after the command name: state=0, ..., utime=11, stime=12
    return (int(f[11]) + int(f[12])) / CLK_TCK


def accept_lines(w):
    return [l for l in w.error_lines() if "accept:" in l]


def test_a_worker_out_of_descriptors_pauses_accepting_and_recovers(weir_factory, origin):
    w = simple(weir_factory, origin, start=False, workers=1,
               timeouts={"client_header": "30s"})
    # soft and hard: the master cannot raise it past this
    w.nofile = 48
    w.start()
    (worker,) = w.wait_workers()
    clients = []
    try:
        # more connections than descriptors: the kernel completes them all
        # (backlog), the worker accepts until EMFILE
        for _ in range(80):
            s = socket.create_connection(("127.0.0.1", w.port), timeout=5)
            clients.append(s)
        wait_until(lambda: accept_lines(w), slack(5), what="an accept failure logged")
        m0 = w.metrics().error("accept_failed")
        lines0 = len(accept_lines(w))
        cpu0 = cpu_seconds(worker)
        time.sleep(3)
        cpu = cpu_seconds(worker) - cpu0
        lines = len(accept_lines(w)) - lines0
        m1 = w.metrics().error("accept_failed")
        print("at the limit for 3 s: worker CPU %.2f s, %d accept log lines, accept_failed +%d"
              % (cpu, lines, m1 - m0))
        # a spinning worker burns ~3 s of CPU here and logs a line per pass
        assert cpu < slack(0.3), "worker used %.2f s of CPU in 3 s at the limit" % cpu
        assert lines <= 6, "%d accept lines in 3 s" % lines
        assert m1 > m0, "the failures go on being counted"
        assert any("time(s) since the last report" in l for l in accept_lines(w))
    finally:
        for s in clients:
            s.close()
    # descriptors free again: new connections are served
    def served():
        try:
            return w.get("/", timeout=2).status == 200
        except (OSError, AssertionError):
            return False
    wait_until(served, slack(10), what="a request answered after the clients left")


def test_the_master_out_of_descriptors_neither_spins_nor_stops_serving_scrapes(weir_factory, origin):
    """The stats socket at the same limit: idle connections take the
    master's last descriptors. It frees one held by a connection still
    waiting for its request (else pauses), rather than spin on accept."""
    w = simple(weir_factory, origin, start=False, workers=1)
    w.nofile = 20  # the master holds about 11 descriptors of its own
    w.start()
    idle = []
    try:
        for _ in range(30):
            idle.append(socket.create_connection(("127.0.0.1", w.stats_port), timeout=5))
        time.sleep(0.3)
        cpu0 = cpu_seconds(w.pid)
        time.sleep(2)
        cpu = cpu_seconds(w.pid) - cpu0
        print("master at the limit for 2 s: CPU %.2f s" % cpu)
        assert cpu < slack(0.3), "master used %.2f s of CPU in 2 s at the limit" % cpu
        m = fetch_metrics(w.stats_port, timeout=slack(3))
        assert m("weir_requests_total") >= 0
    finally:
        for s in idle:
            s.close()
