"""HTTP/2 clients for the h2 tests: python3-h2 for well-formed sessions,
hyperframe and hpack for the frames a well-behaved library never sends."""

import socket
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hpack
from hyperframe import frame as hf

from harness import slack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def split_goaway(buf):
    """(the whole frames of <buf> but its GOAWAYs, the partial frame left
    over, [(last stream id, error code)] of each GOAWAY). python3-h2 takes
    a GOAWAY as the connection's end and refuses the frames of the
    streams still open; a client that finishes them hides it from h2."""
    out, goaways = [], []
    while len(buf) >= 9:
        n = int.from_bytes(buf[:3], "big")
        if len(buf) < 9 + n:
            break
        f, buf = buf[:9 + n], buf[9 + n:]
        if f[3] == 0x7:
            goaways.append((int.from_bytes(f[9:13], "big") & 0x7fffffff, int.from_bytes(f[13:17], "big")))
            continue
        out.append(f)
    return b"".join(out), buf, goaways


class H2Client:
    """One HTTP/2 connection with prior knowledge (or over <sock>)."""

    def __init__(self, port, sock=None, settings=None, past_goaway=False, sent=0):
        """<sent>: the first bytes of the preface were already written on
        <sock> by the caller."""
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=slack(5))
        cfg = h2.config.H2Configuration(client_side=True, header_encoding=None,
                                        validate_outbound_headers=False,
                                        normalize_outbound_headers=False,
                                        validate_inbound_headers=False)
        self.conn = h2.connection.H2Connection(cfg)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.sock.sendall(self.conn.data_to_send()[sent:])
        self.responses = {}   # stream id -> {"status", "headers", "body", "ended", "reset"}
        self.goaway = None    # the error code of a GOAWAY received
        self.last_stream_id = None  # and its last stream id
        self.closed = False
        # python3-h2 takes a GOAWAY as the connection's end and refuses
        # the frames of the streams it left open; with <past_goaway> the
        # GOAWAY is taken out of the bytes before h2 sees them, as a
        # client that finishes its streams does
        self.past_goaway = past_goaway
        self.rbuf = b""

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, path, method="GET", authority="localhost", headers=(), body=None, end=True):
        sid = self.conn.get_next_available_stream_id()
        hs = [(":method", method), (":path", path), (":scheme", "http")]
        if authority is not None:
            hs.append((":authority", authority))
        hs += list(headers)
        self.conn.send_headers(sid, hs, end_stream=body is None and end)
        self.responses[sid] = {"status": None, "headers": [], "body": b"", "ended": False, "reset": None,
                               "trailers": None}
        if body is not None:
            self.send_body(sid, body, end=end)
        self.flush()
        return sid

    def send_body(self, sid, body, end=True):
        """Sends <body> as the window allows, reading meanwhile."""
        off = 0
        deadline = time.monotonic() + slack(20)
        while off < len(body):
            room = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            if room <= 0:
                self.flush()
                self.read_some(0.5)
                if time.monotonic() > deadline:
                    raise AssertionError("no window to send the body")
                continue
            k = min(room, len(body) - off)
            self.conn.send_data(sid, body[off:off + k])
            off += k
            self.flush()
        if end:
            self.conn.end_stream(sid)
        self.flush()

    def read_some(self, timeout):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return True
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return False
        if self.past_goaway:
            data = self.strip_goaway(data)
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.closed = True
            return False
        for ev in events:
            r = self.responses.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived):
                r["headers"] = [(n.decode(), v.decode()) for n, v in ev.headers]
                r["status"] = int(dict(r["headers"])[":status"])
            elif isinstance(ev, h2.events.TrailersReceived):
                if r is not None:
                    r["trailers"] = [(n.decode(), v.decode()) for n, v in ev.headers]
            elif isinstance(ev, h2.events.DataReceived):
                if r is not None:
                    r["body"] += ev.data
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                if r is not None:
                    r["ended"] = True
            elif isinstance(ev, h2.events.StreamReset):
                if r is not None:
                    r["reset"] = int(ev.error_code)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.goaway = int(ev.error_code)
                self.last_stream_id = ev.last_stream_id
        self.flush()
        return True

    def strip_goaway(self, data):
        """The whole frames of rbuf + <data> but a GOAWAY, which is
        recorded; a partial frame waits for the rest."""
        frames, self.rbuf, goaways = split_goaway(self.rbuf + data)
        if goaways:
            self.last_stream_id, self.goaway = goaways[-1]
        return frames

    def wait(self, sids, timeout=5.0):
        """Reads until every stream of <sids> ended or was reset."""
        deadline = time.monotonic() + slack(timeout)
        while time.monotonic() < deadline:
            if all(self.responses[s]["ended"] or self.responses[s]["reset"] is not None for s in sids):
                return [self.responses[s] for s in sids]
            if not self.read_some(0.2):
                break
        return [self.responses[s] for s in sids]

    def get(self, path, **kw):
        sid = self.request(path, **kw)
        return self.wait([sid])[0]

    def wait_goaway(self, timeout=5.0):
        deadline = time.monotonic() + slack(timeout)
        while self.goaway is None and not self.closed and time.monotonic() < deadline:
            self.read_some(0.2)
        return self.goaway

    def close(self):
        self.sock.close()


class RawH2:
    """Frames written by hand, after the preface and an empty SETTINGS."""

    def __init__(self, port, ack=True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=slack(5))
        self.enc = hpack.Encoder()
        self.ack = ack
        self.buf = b""
        self.sock.sendall(PREFACE + hf.SettingsFrame(0).serialize())

    def send(self, *frames):
        self.sock.sendall(b"".join(f.serialize() for f in frames))

    def headers(self, sid, hs, end_stream=True, end_headers=True):
        f = hf.HeadersFrame(sid)
        f.data = self.enc.encode(hs)
        f.flags = set()
        if end_stream:
            f.flags.add("END_STREAM")
        if end_headers:
            f.flags.add("END_HEADERS")
        return f

    def frames(self, timeout=3.0):
        """Reads frames until the peer closes or is quiet for <timeout>;
        acknowledges SETTINGS unless told not to."""
        out = []
        self.sock.settimeout(slack(timeout))
        while True:
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not data:
                break
            self.buf += data
            while len(self.buf) >= 9:
                f, length = hf.Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) < 9 + length:
                    break
                f.parse_body(memoryview(self.buf[9:9 + length]))
                self.buf = self.buf[9 + length:]
                out.append(f)
                if isinstance(f, hf.SettingsFrame) and "ACK" not in f.flags and self.ack:
                    try:
                        self.send(hf.SettingsFrame(0, flags=["ACK"]))
                    except OSError:
                        pass
                if isinstance(f, hf.GoAwayFrame):
                    return out
        return out

    def close(self):
        self.sock.close()


def goaway_of(frames):
    for f in frames:
        if isinstance(f, hf.GoAwayFrame):
            return f.error_code
    return None


def request_headers(path, authority="localhost", method="GET"):
    return [(":method", method), (":path", path), (":scheme", "http"), (":authority", authority)]
