"""The master speaks systemd's readiness protocol (sd_notify): the test
plays the service manager, a unix datagram socket named in NOTIFY_SOCKET
that receives each message with its sender's credentials. READY=1 after
start, RELOADING=1 then READY=1 around a reload (good or bad), STOPPING=1
on QUIT, and on a binary upgrade MAINPID=<new master> from the new master
itself, before the old master exits, and nothing from the old one after."""

import os
import signal
import socket
import struct

import pytest

from harness import pid_alive, slack, wait_until
from test_upgrade import masters, private_binary, read_pid, start_weir  # noqa: F401 - fixtures
from test_reload import fast_origin  # noqa: F401 - fixture


class Manager:
    """A service manager's notify socket: messages with their sender pid."""

    def __init__(self, address):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

    def next(self, timeout=10):
        """(sender pid, {key: value}) of the next message."""
        self.sock.settimeout(slack(timeout))
        data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:12])[0]
        fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
        return pid, fields

    def none_for(self, seconds):
        self.sock.settimeout(seconds)
        try:
            data = self.sock.recv(4096)
        except socket.timeout:
            return None
        return data

    def close(self):
        self.sock.close()


@pytest.fixture
def manager(tmp_path, monkeypatch):
    path = str(tmp_path / "notify.sock")
    m = Manager(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    yield m
    m.close()


def test_start_reloads_and_stop_are_told_to_the_service_manager(weir_factory, origin, manager):
    w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                     routes=[{"path": "/", "upstream": "a"}])
    pid, f = manager.next()
    assert pid == w.pid and f["READY"] == "1", f
    assert w.get("/").status == 200

    w.signal(signal.SIGHUP)
    pid, f = manager.next()
    assert pid == w.pid and f["RELOADING"] == "1" and int(f["MONOTONIC_USEC"]) > 0, f
    pid, f = manager.next()
    assert pid == w.pid and f["READY"] == "1" and "failed" not in f["STATUS"], f

    # a broken configuration: the reload fails, and the manager hears so
    good = open(w.conf).read()
    w.write_raw_config(good + "\nthis is not a setting\n")
    w.signal(signal.SIGHUP)
    pid, f = manager.next()
    assert f["RELOADING"] == "1", f
    pid, f = manager.next()
    assert f["READY"] == "1" and "reload failed" in f["STATUS"], f
    w.write_raw_config(good)

    w.signal(signal.SIGQUIT)
    pid, f = manager.next()
    assert pid == w.pid and f == {"STOPPING": "1"}, f
    assert w.wait_exit(10) == 0


def test_an_abstract_notify_socket_is_reached(weir_factory, origin, monkeypatch):
    name = "weir-test-%d" % os.getpid()
    m = Manager("\0" + name)
    monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
    try:
        w = weir_factory(upstreams=[{"name": "a", "servers": [origin.addr]}],
                         routes=[{"path": "/", "upstream": "a"}])
        pid, f = m.next()
        assert pid == w.pid and f["READY"] == "1", f
    finally:
        m.close()


def test_usr2_names_the_new_main_pid_before_the_old_master_exits(weir_factory, fast_origin, masters,  # noqa: F811
                                                                 private_binary, manager):
    w = start_weir(weir_factory, fast_origin)
    pid, f = manager.next()
    assert pid == w.pid and f["READY"] == "1", f

    # a head under way keeps an old worker, and so the old master, up
    # (until client_header, 2 s) after the new one takes over: with no
    # connection the old master exits within a millisecond, before this
    # process may even have read the datagram sent ahead of it
    held = socket.create_connection(("127.0.0.1", w.port), timeout=slack(5))
    held.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    wait_until(lambda: w.metrics()("weir_client_connections_active") >= 1, slack(5), what="the held connection")
    w.signal(signal.SIGUSR2)
    pid, f = manager.next(timeout=30)
    masters.append(pid)
    # the new master says it, of itself, while the old one still runs
    assert pid != w.pid and int(f["MAINPID"]) == pid and f["READY"] == "1", f
    assert pid_alive(w.pid), "the old master exited before systemd heard of the new one"
    held.close()
    wait_until(lambda: read_pid(w.pid_file) == pid, slack(10), what="the new pid file")
    assert w.wait_exit(20) == 0
    # the old master stopped without a word: the service did not stop
    assert manager.none_for(0.5) is None
    assert w.get("/").status == 200

    os.kill(pid, signal.SIGQUIT)
    npid, f = manager.next()
    assert npid == pid and f == {"STOPPING": "1"}, f
