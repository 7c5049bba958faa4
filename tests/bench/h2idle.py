#!/usr/bin/env python3
"""h2idle.py: memory per idle HTTP/2 client connection of one proxy process.

    tests/bench/h2idle.py PORT PID N [--tls] [--path P]

Opens N connections to 127.0.0.1:PORT (TLS with ALPN h2, or h2c with prior
knowledge), each sending the preface, SETTINGS and one GET, acknowledging
the server's SETTINGS and reading the whole answer, then left idle. Prints

    mem_idle ok=K alive=A rss_before_kb=B rss_after_kb=C kib_per_conn=X

X being the RSS growth of process PID over K. Called by h2peers.sh; the
frames are written by hand so that no HTTP/2 library is needed.
"""
import resource, socket, ssl, struct, sys, time

from benchlib import rss_kb

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, HEADERS, DATA, PING, GOAWAY = 4, 1, 0, 6, 7
END_STREAM, ACK = 0x1, 0x1


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream) + payload


def literal(index, value):
    # literal header field without indexing, name from the static table
    v = value.encode()
    return bytes([index]) + bytes([len(v)]) + v


def request(tls, path):
    block = b"\x82" + (b"\x87" if tls else b"\x86")  # :method GET, :scheme
    block += b"\x84" if path == "/" else literal(4, path)  # :path
    block += literal(1, "127.0.0.1")  # :authority
    return frame(HEADERS, 0x4 | END_STREAM, 1, block)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def open_one(port, tls, path, ctx):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if tls:
        s = ctx.wrap_socket(s, server_hostname="localhost")
        if s.selected_alpn_protocol() != "h2":
            raise ConnectionError("no h2 by ALPN")
    s.sendall(PREFACE + frame(SETTINGS, 0, 0) + request(tls, path))
    while True:
        head = recv_exact(s, 9)
        length = int.from_bytes(head[:3], "big")
        kind, flags, stream = head[3], head[4], struct.unpack(">I", head[5:9])[0] & 0x7FFFFFFF
        payload = recv_exact(s, length)
        if kind == SETTINGS and not flags & ACK:
            s.sendall(frame(SETTINGS, ACK, 0))
        elif kind == PING and not flags & ACK:
            s.sendall(frame(PING, ACK, 0, payload))
        elif kind == GOAWAY:
            raise ConnectionError("GOAWAY")
        elif kind in (HEADERS, DATA) and stream == 1 and flags & END_STREAM:
            return s


def alive(s):
    # what can be read now is consumed: the connection is closed next anyway
    s.setblocking(False)
    try:
        return s.recv(4096) != b""
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    except OSError:
        return False


def open_many(port, n, tls, path, ctx, end):
    socks = []
    for _ in range(n):
        if time.time() > end:
            break
        try:
            socks.append(open_one(port, tls, path, ctx))
        except (OSError, ConnectionError) as e:
            print(f"# h2idle: connection {len(socks) + 1}: {e}", file=sys.stderr)
            break
    return socks


def main():
    args = sys.argv[1:]
    tls = "--tls" in args
    path = "/"
    if "--path" in args:
        path = args[args.index("--path") + 1]
    pos = [a for a in args if not a.startswith("--") and a != path]
    port, pid, n = int(pos[0]), int(pos[1]), int(pos[2])
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    end = time.time() + 60  # bounded: one minute of opening at most
    warm = open_many(port, 50, tls, path, ctx, end)  # lazy start-up allocations
    time.sleep(0.3)
    before = rss_kb(pid)
    socks = open_many(port, n, tls, path, ctx, end)
    time.sleep(1.0)
    after = rss_kb(pid)
    live = sum(alive(s) for s in socks)
    for s in socks + warm:
        s.close()
    per = (after - before) / max(len(socks), 1)
    print(f"mem_idle ok={len(socks)} alive={live} rss_before_kb={before} rss_after_kb={after} kib_per_conn={per:.1f}")


main()
