"""Scaling with cores: worker_cpu_affinity pins worker i to the i-th allowed
CPU, reuseport_steering = "cpu" hands a connection to the worker on the CPU
that received it, and the listener options tcp_fastopen and defer_accept."""

import ctypes
import os
import re
import socket
import subprocess
import time

import pytest

from harness import Client, build_request, simple, slack, wait_until

CPUS = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")
CPU_STEERING = 'worker_cpu_affinity = true; reuseport_steering = "cpu";'


def _start(weir_factory, origin, listener="", **kw):
    """weir with <listener> options added to its one listener."""
    w = simple(weir_factory, origin, start=False, **kw)
    text = open(w.conf).read()
    if listener:
        text = re.sub(r'(address = "127\.0\.0\.1:\d+";)', r"\1 " + listener, text, count=1)
    w.write_raw_config(text)
    w.start()
    return w


def _workers_by_index(w, n=2):
    """{index: pid} from the master's "worker %d started, pid %d" lines."""
    return wait_until(lambda: (lambda f: f if len(f) >= n else None)(_latest_workers(w)),
                      slack(5), what="%d workers logged" % n)


def _cpus_allowed(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list for %d" % pid)


def _owner_pids(port):
    """The pid owning each established server-side socket on <port>."""
    out = subprocess.run(["ss", "-Htnp", "state", "established", "( sport = :%d )" % port],
                         capture_output=True, text=True, check=True).stdout
    return [int(p) for p in re.findall(r"pid=(\d+)", out)]


def _spread(w, cpu, n):
    """Opens <n> kept-alive connections from this process pinned to <cpu>;
    returns {worker pid: connections it accepted}."""
    saved = os.sched_getaffinity(0)
    clients = []
    try:
        os.sched_setaffinity(0, {cpu})
        for _ in range(n):
            c = Client(w.port, timeout=5)
            assert c.request("GET", "/bytes/1").status == 200
            clients.append(c)
    finally:
        os.sched_setaffinity(0, saved)
    try:
        owners = wait_until(lambda: (lambda p: p if len(p) >= n else None)(_owner_pids(w.port)),
                            slack(3), what="%d accepted sockets" % n)
        spread = {}
        for p in owners:
            spread[p] = spread.get(p, 0) + 1
        return spread
    finally:
        for c in clients:
            c.close()


@needs_two
def test_each_worker_is_pinned_to_its_own_cpu(weir_factory, origin):
    w = simple(weir_factory, origin, workers=2, extra="worker_cpu_affinity = true;")
    pids = _workers_by_index(w)
    assert [_cpus_allowed(pids[i]) for i in (0, 1)] == [str(CPUS[0]), str(CPUS[1])]
    # the line is written after the pinning, when the worker's loop first
    # waits: the mask can be seen before it
    wait_until(lambda: all("pinned to CPU %d" % CPUS[i] in open(w.error_log).read() for i in (0, 1)), slack(5),
               what="both workers' pinned lines")


def test_affinity_false_leaves_workers_on_every_cpu(weir_factory, origin):
    w = simple(weir_factory, origin, workers=2, extra="worker_cpu_affinity = false;")
    pids = _workers_by_index(w)
    mine = _cpus_allowed(os.getpid())
    assert [_cpus_allowed(pids[i]) for i in (0, 1)] == [mine, mine]


@needs_two
def test_a_connection_lands_on_the_worker_of_the_cpu_that_received_it(weir_factory, origin):
    w = simple(weir_factory, origin, workers=2, extra=CPU_STEERING)
    pids = _workers_by_index(w)
    for i in (0, 1):
        # over loopback the SYN is received on the CPU that sent it
        assert _spread(w, CPUS[i], 20) == {pids[i]: 20}


@needs_two
def test_hash_steering_spreads_connections_over_both_workers(weir_factory, origin):
    # the default: affinity on, no program
    w = simple(weir_factory, origin, workers=2, extra="worker_cpu_affinity = true;")
    pids = _workers_by_index(w)
    spread = _spread(w, CPUS[0], 40)
    # by the 4-tuple hash: all 40 on one worker has odds 2^-39
    assert set(spread) == {pids[0], pids[1]}, spread


@needs_two
def test_a_reload_re_attaches_the_program_for_the_new_group(weir_factory, origin):
    import signal
    w = simple(weir_factory, origin, workers=1, extra=CPU_STEERING)
    _workers_by_index(w, 1)

    def started():
        return len(re.findall(r"worker \d+ started", open(w.error_log, errors="replace").read()))

    def reload(text, n):
        before = started()
        w.write_raw_config(text)
        w.signal(signal.SIGHUP)
        wait_until(lambda: started() >= before + n, slack(10), what="%d new workers" % n)
        w.wait_workers(n, timeout=10)  # the old ones gone: only the new ones accept
        return _latest_workers(w)

    # one worker: the program knows CPU 0 only; three: CPU 1 is worker 1's,
    # and worker 2 shares CPU 0, whose first worker takes its connections
    text = open(w.conf).read().replace("workers = 1;", "workers = 3;")
    pids = reload(text, 3)
    # the master logs "started" once it has forked; the worker pins itself
    # a moment later, so a loaded machine can show it unpinned at first
    wait_until(lambda: _cpus_allowed(pids[2]) == str(CPUS[0]), slack(5),
               what="worker 2 pinned to CPU %d" % CPUS[0])
    assert _spread(w, CPUS[1], 10) == {pids[1]: 10}
    # "hash" takes the program off again
    pids = reload(text.replace('"cpu"', '"hash"'), 3)
    assert len(_spread(w, CPUS[1], 30)) > 1


def _alive_worker(pid):
    return os.path.exists("/proc/%d" % pid)


def _latest_workers(w):
    """{index: pid} of the last worker logged for each index."""
    found = {}
    for line in open(w.error_log, errors="replace"):
        m = re.search(r"worker (\d+) started, pid (\d+)", line)
        if m:
            found[int(m.group(1))] = int(m.group(2))
    return found


# -- listener options, read back from the master's listening sockets ------

SYS_pidfd_getfd = 438
libc = ctypes.CDLL(None, use_errno=True)


def _listener_sockets(w):
    """Copies of the master's listening sockets on w.port (pidfd_getfd)."""
    pidfd = os.pidfd_open(w.pid)
    socks = []
    try:
        for name in os.listdir("/proc/%d/fd" % w.pid):
            try:
                if not os.readlink("/proc/%d/fd/%s" % (w.pid, name)).startswith("socket:"):
                    continue
            except OSError:
                continue
            fd = libc.syscall(SYS_pidfd_getfd, pidfd, int(name), 0)
            if fd < 0:
                continue
            s = socket.socket(fileno=fd)
            try:
                if (s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                        and s.family == socket.AF_INET and s.getsockname()[1] == w.port):
                    socks.append(s)
                    continue
            except OSError:
                pass
            s.close()
    finally:
        os.close(pidfd)
    return socks


def _opt(w, opt):
    socks = _listener_sockets(w)
    try:
        assert len(socks) == w.workers, socks
        return sorted({s.getsockopt(socket.IPPROTO_TCP, opt) for s in socks})
    finally:
        for s in socks:
            s.close()


def test_listener_options_are_off_by_default(weir_factory, origin):
    w = simple(weir_factory, origin, workers=2)
    assert _opt(w, socket.TCP_FASTOPEN) == [0]
    assert _opt(w, socket.TCP_DEFER_ACCEPT) == [0]


def test_tcp_fastopen_and_defer_accept_are_set_on_every_socket(weir_factory, origin):
    w = _start(weir_factory, origin, 'tcp_fastopen = 64; defer_accept = "3s";', workers=2)
    assert _opt(w, socket.TCP_FASTOPEN) == [64]
    # the kernel keeps a number of SYN-ACK retransmits: 3 s reads back as 3
    assert _opt(w, socket.TCP_DEFER_ACCEPT) == [3]
    # a request still goes through a deferred accept: it carries data
    with Client(w.port) as c:
        assert c.request("GET", "/bytes/1").status == 200


def test_a_reload_turns_tcp_fastopen_off_on_kept_sockets(weir_factory, origin):
    import signal
    w = _start(weir_factory, origin, "tcp_fastopen = 64;", workers=2)
    assert _opt(w, socket.TCP_FASTOPEN) == [64]
    w.write_raw_config(open(w.conf).read().replace("tcp_fastopen = 64;", ""))
    w.signal(signal.SIGHUP)
    wait_until(lambda: _opt(w, socket.TCP_FASTOPEN) == [0], slack(5), what="tcp_fastopen off")


def _tfo_passive():
    lines = open("/proc/net/netstat").read().splitlines()
    for names, values in zip(lines[0::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split()[1:], values.split()[1:]))["TCPFastOpenPassive"])
    raise AssertionError("no TcpExt in /proc/net/netstat")


@pytest.fixture
def tfo_sysctl():
    path = "/proc/sys/net/ipv4/tcp_fastopen"
    try:
        old = open(path).read().strip()
        with open(path, "w") as f:
            f.write("3")  # client and server
    except OSError:
        pytest.skip("cannot set net.ipv4.tcp_fastopen")
    yield
    with open(path, "w") as f:
        f.write(old)


def test_a_fast_open_request_is_served_from_the_syn(weir_factory, origin, tfo_sysctl):
    w = _start(weir_factory, origin, "tcp_fastopen = 16;", workers=2)
    before = _tfo_passive()
    req = build_request("GET", "/bytes/1", headers=[("Connection", "close")])
    for _ in range(3):  # the first fetches the cookie, the next ones use it
        s = socket.socket()  # blocking: without a cookie yet, sendto connects first
        s.sendto(req, socket.MSG_FASTOPEN, ("127.0.0.1", w.port))
        s.settimeout(5)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        assert data.startswith(b"HTTP/1.1 200"), data[:80]
        time.sleep(0.05)
    assert _tfo_passive() - before >= 2


def test_bad_values_are_refused_with_file_and_line(weir_factory, origin):
    w = simple(weir_factory, origin, start=False, workers=2, extra='worker_cpu_affinity = "sometimes";')
    text = open(w.conf).read()
    text = re.sub(r'(address = "127\.0\.0\.1:\d+";)', r'\1 tcp_fastopen = 70000; defer_accept = "soon";', text)
    w.write_raw_config(text)
    from harness import WEIR_BIN
    r = subprocess.run([WEIR_BIN, "-t", "-c", w.conf], capture_output=True, text=True)
    assert r.returncode != 0
    assert re.search(r'weir\.conf:\d+: worker_cpu_affinity "sometimes" is not one of false, true, auto', r.stderr)
    assert re.search(r"weir\.conf:\d+: listeners\.tcp_fastopen must be from 0 to 65535", r.stderr)
    assert re.search(r'weir\.conf:\d+: listeners\.defer_accept "soon" is not a duration', r.stderr)
