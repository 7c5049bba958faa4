"""An HTTP/2 origin for the h2-upstream tests (python3-h2), run in a thread
of the test: h2c with prior knowledge, or TLS with ALPN. It counts what it
saw (connections, streams, the most streams open at once on a connection)
so that a test can assert multiplexing and MAX_CONCURRENT_STREAMS.

Endpoints: /echo (JSON: method, path, authority, headers, body length and
sha256), /bytes/N (N bytes of a fixed pattern), /slow/MS/... (answers
after MS ms), /early (413 at the head, then RST_STREAM NO_ERROR), /stall (never gives back window: an upload stalls), /trailers
(as /echo, with the request's trailers, no content-length, and a
trailing HEADERS: x-checksum, the body's sha256, x-more, then a field per
t=NAME:VALUE of the query), /rst (RST_STREAM INTERNAL_ERROR, no answer), anything else
as /echo. With goaway_after=N, the Nth stream of the first connection gets a
GOAWAY naming it the last: the streams after it are never processed."""

import hashlib
import json
import select
import socket
import ssl
import threading
import time
import urllib.parse

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from hyperframe import frame as hf


def pattern(n):
    block = bytes(range(256)) * 64
    out = bytearray()
    while len(out) < n:
        out += block
    return bytes(out[:n])


class H2Origin:
    def __init__(self, max_streams=100, tls=None, alpn=("h2",), goaway_after=0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.addr = "127.0.0.1:%d" % self.port
        self.max_streams = max_streams
        self.goaway_after = goaway_after
        self.ctx = None
        if tls:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(tls[0], tls[1])
            if alpn:
                self.ctx.set_alpn_protocols(list(alpn))
        self.lock = threading.Lock()
        self.connections = 0
        self.streams = 0
        self.max_open = 0      # the most streams open at once on one connection
        self.requests = []     # (method, path, headers)
        self.resets = 0        # RST_STREAM received
        self.sent = 0          # response body bytes sent (as the window allowed)
        self.goaways = 0       # GOAWAYs sent (goaway_after: on the first connection only)
        self.errors = []
        self.stop = False
        self.t = threading.Thread(target=self.accept_loop, daemon=True)
        self.t.start()

    def close(self):
        self.stop = True
        try:
            self.sock.close()
        except OSError:
            pass

    def accept_loop(self):
        while not self.stop:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def serve(self, s):
        try:
            if self.ctx:
                s = self.ctx.wrap_socket(s, server_side=True)
            Conn(self, s).run()
        except (OSError, ssl.SSLError, h2.exceptions.ProtocolError) as e:
            with self.lock:
                self.errors.append(repr(e))
        finally:
            try:
                s.close()
            except OSError:
                pass


# /fields/NAME: response heads a server should not send, as it sends them
FIELDS = {
    "upper": [("X-Upper", "1"), ("content-length", "2")],
    "connection": [("connection", "close"), ("content-length", "2")],
    "keepalive": [("keep-alive", "timeout=5"), ("content-length", "2")],
    "te": [("transfer-encoding", "chunked")],
    "badlength": [("content-length", "2x")],
    "twolengths": [("content-length", "2"), ("content-length", "3")],
    "fine": [("x-fine", "1"), ("content-length", "2")],
}


class Conn:
    def __init__(self, origin, s):
        self.o = origin
        self.s = s
        # fields go as given: /fields/ sends some HTTP/2 forbids
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8",
                                        validate_outbound_headers=False, normalize_outbound_headers=False)
        self.c = h2.connection.H2Connection(cfg)
        self.c.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: origin.max_streams})
        self.reqs = {}       # sid -> {"headers", "body", "hash"}
        self.out = {}        # sid -> [bytes left, trailers]
        self.due = []        # (time, sid, response)
        self.open = 0
        self.nstreams = 0
        self.last = 0        # with goaway_after: the last stream processed

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.s.sendall(data)

    def run(self):
        self.c.initiate_connection()
        self.flush()
        while True:
            timeout = 0.05 if (self.due or self.out) else 0.5
            r, _, _ = select.select([self.s], [], [], timeout)
            if self.o.stop:
                return
            if r or (hasattr(self.s, "pending") and self.s.pending()):
                data = self.s.recv(65536)
                if not data:
                    return
                for ev in self.c.receive_data(data):
                    self.event(ev)
            now = time.monotonic()
            for d in [d for d in self.due if d[0] <= now]:
                self.due.remove(d)
                self.respond(d[1], *d[2])
            self.pump()
            self.flush()
            if self.last and not self.reqs and not self.out and not self.due:
                # after a GOAWAY: every stream it kept is answered; a
                # graceful close (unread bytes would make close() a reset)
                self.s.shutdown(socket.SHUT_WR)
                end = time.monotonic() + 1.0
                while time.monotonic() < end:
                    r, _, _ = select.select([self.s], [], [], 0.1)
                    if r and not self.s.recv(65536):
                        break
                return

    def event(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            sid = ev.stream_id
            if self.last and sid > self.last:
                return  # past our GOAWAY: never processed
            self.nstreams += 1
            self.open += 1
            with self.o.lock:
                self.o.streams += 1
                self.o.max_open = max(self.o.max_open, self.open)
                hs = [(n, v) for n, v in ev.headers]
                self.o.requests.append((dict(hs).get(":method"), dict(hs).get(":path"), hs))
            self.reqs[sid] = {"headers": hs, "body": 0, "hash": hashlib.sha256()}
            if self.o.goaway_after and self.nstreams == self.o.goaway_after and self.o.goaways == 0:
                self.o.goaways += 1
                # by hand: python3-h2's own GOAWAY closes its state machine,
                # which then refuses the frames a client may still send
                self.last = sid
                self.flush()
                self.s.sendall(hf.GoAwayFrame(0, last_stream_id=sid, error_code=0).serialize())
            if dict(hs).get(":path", "").startswith("/early") and not ev.stream_ended:
                # answered before the body, which is then refused
                self.reqs.pop(sid, None)
                self.open -= 1
                self.c.send_headers(sid, [(":status", "413"), ("content-length", "8")])
                self.c.send_data(sid, b"too big\n", end_stream=True)
                self.c.reset_stream(sid, error_code=0)
                return
            if ev.stream_ended:
                self.request_done(sid)
        elif isinstance(ev, h2.events.DataReceived):
            q = self.reqs.get(ev.stream_id)
            if q is None or not dict(q["headers"]).get(":path", "").startswith("/stall"):
                try:
                    self.c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                except h2.exceptions.StreamClosedError:
                    pass  # a stream we reset: the connection's window only
            if q is not None:
                q["body"] += len(ev.data)
                q["hash"].update(ev.data)
            if ev.stream_ended:
                self.request_done(ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived):
            q = self.reqs.get(ev.stream_id)
            if q is not None:
                q["trailers"] = [(n, v) for n, v in ev.headers]
            if ev.stream_ended:
                self.request_done(ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            self.request_done(ev.stream_id)
        elif isinstance(ev, h2.events.StreamReset):
            with self.o.lock:
                self.o.resets += 1
            self.gone(ev.stream_id)

    def gone(self, sid):
        if self.reqs.pop(sid, None) is not None or sid in self.out:
            self.open -= 1
        self.out.pop(sid, None)
        self.due = [d for d in self.due if d[1] != sid]

    def request_done(self, sid):
        q = self.reqs.get(sid)
        if q is None or q.get("done"):
            return
        q["done"] = True
        hs = dict(q["headers"])
        path = hs.get(":path", "/")
        if path.startswith("/midrst"):
            # an answer under way, then RST_STREAM INTERNAL_ERROR
            self.c.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc")])
            self.c.send_data(sid, b"\0\0\0\0\x05hello")
            self.c.reset_stream(sid, error_code=2)
            self.reqs.pop(sid, None)
            self.open -= 1
            return
        if path.startswith("/rst"):
            self.c.reset_stream(sid, error_code=2)
            self.reqs.pop(sid, None)
            self.open -= 1
            return
        if path.startswith("/fields/"):
            # a head with the fields FIELDS[name], then "ok"
            resp = (200, FIELDS[path.split("/")[2].split("?")[0]], b"ok")
        elif path.startswith("/bytes/"):
            n = int(path.split("/")[2].split("?")[0])
            body = pattern(n)
            extra = [("content-length", str(n))] if "nolength" not in path else []
            resp = (200, [("content-type", "application/octet-stream")] + extra, body)
        else:
            e = {"method": hs.get(":method"), "path": path, "authority": hs.get(":authority"),
                 "scheme": hs.get(":scheme"), "headers": q["headers"], "length": q["body"],
                 "sha256": q["hash"].hexdigest(), "trailers": q.get("trailers", [])}
            body = json.dumps(e).encode()
            resp = (200, [("content-type", "application/json"), ("content-length", str(len(body)))], body)
        if path.startswith("/trailers"):
            # no content-length, and a trailing HEADERS after the DATA
            self.reqs.pop(sid, None)
            self.c.send_headers(sid, [(":status", "200"), ("content-type", "application/json")])
            self.c.send_data(sid, body)
            extra = [tuple(t.split(":", 1))
                     for k, t in urllib.parse.parse_qsl(path.partition("?")[2]) if k == "t"]
            self.c.send_headers(sid, [("x-checksum", hashlib.sha256(body).hexdigest()), ("x-more", "yes")] + extra,
                                end_stream=True)
            self.open -= 1
            return
        if path.startswith("/slow/"):
            ms = int(path.split("/")[2])
            self.due.append((time.monotonic() + ms / 1000.0, sid, resp))
            return
        self.respond(sid, *resp)

    def respond(self, sid, status, headers, body):
        if sid not in self.reqs:
            return
        self.reqs.pop(sid, None)
        self.c.send_headers(sid, [(":status", str(status)), ("x-origin", "h2")] + headers,
                            end_stream=not body)
        if body:
            self.out[sid] = [body]
        else:
            self.open -= 1

    def pump(self):
        for sid in list(self.out):
            left = self.out[sid][0]
            while left:
                room = min(self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size)
                if room <= 0:
                    break
                chunk, left = left[:room], left[room:]
                self.c.send_data(sid, chunk, end_stream=not left)
                with self.o.lock:
                    self.o.sent += len(chunk)
            if left:
                self.out[sid][0] = left
            else:
                del self.out[sid]
                self.open -= 1
