#!/usr/bin/python3
"""relay.py: a TCP relay between weir and an origin that injects faults.

Principle: the faults the kernel of this machine cannot make (it has no
netem) are made here, at the byte stream: each chunk read from one side is
written to the other after a delay with jitter, and a chosen share of the
connections (spread evenly, the first one included) is cut once a random number of response bytes (or, with
--direction up, upload bytes) has passed, by a reset (SO_LINGER 0) or a
half-close (FIN towards weir mid-body, the origin side closed). Order is kept: a chunk never overtakes the one before
it, as TCP would not let it. Every fault is counted in --stats (a small JSON
file rewritten after each one), so the suite can compare what was injected
with what weir counted.

    relay.py --listen IP:PORT --to IP:PORT [--delay MS] [--jitter MS]
             [--fault reset|halfclose] [--direction down|up] [--share P]
             [--cut-min N] [--cut-max N] [--stats FILE]

Prints "ready" once listening. Runs until SIGTERM or SIGKILL.
"""

import argparse
import asyncio
import json
import math
import os
import random
import signal
import socket
import struct
import sys
import time

HALF_CLOSE_HOLD = 30.0  # a half-closed connection is dropped after this


class Relay:
    def __init__(self, a):
        self.a = a
        self.delay = a.delay / 1000.0
        self.jitter = a.jitter / 1000.0
        self.stats = {"connections": 0, "armed": 0, "resets": 0, "halfcloses": 0}

    def write_stats(self):
        if not self.a.stats:
            return
        tmp = self.a.stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.stats, f)
        os.replace(tmp, self.a.stats)

    def lag(self):
        if not self.delay:
            return 0.0
        return max(0.0, self.delay + random.uniform(-self.jitter, self.jitter))

    async def pump(self, reader, writer, cut, on_cut):
        """Copies reader to writer with the delay; calls on_cut when <cut>
        bytes have passed (cut None: never). Returns when reader ends."""
        queue = asyncio.Queue()
        passed = 0
        last = 0.0

        async def sender():
            while True:
                item = await queue.get()
                if item is None:
                    return
                due, data = item
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if writer.transport.is_closing():
                    continue  # the other side was cut: drop what comes
                if data == b"":
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        task = asyncio.ensure_future(sender())
        try:
            while True:
                data = await reader.read(65536)
                due = max(time.monotonic() + self.lag(), last)
                last = due
                if not data:
                    queue.put_nowait((due, b""))
                    break
                if cut is not None and passed + len(data) >= cut:
                    head = data[:max(0, cut - passed)]
                    if head:
                        queue.put_nowait((due, head))
                    queue.put_nowait(None)
                    await task
                    await on_cut()
                    return
                passed += len(data)
                queue.put_nowait((due, data))
            await task
        finally:
            if not task.done():
                task.cancel()

    async def handle(self, creader, cwriter):
        i = self.stats["connections"]
        self.stats["connections"] += 1
        try:
            oreader, owriter = await asyncio.wait_for(
                asyncio.open_connection(self.a.to_host, self.a.to_port), 5)
        except (OSError, asyncio.TimeoutError):
            abort(cwriter)
            return
        cut = None
        # the share spread evenly, the first connection armed: weir keeps
        # its pooled connections, so a coin per connection could leave the
        # few it opens all uncut (one run in a few hundred at 0.5) and the
        # fault untried
        if self.a.fault and math.ceil((i + 1) * self.a.share) != math.ceil(i * self.a.share):
            cut = random.randint(self.a.cut_min, self.a.cut_max)
            self.stats["armed"] += 1
        self.write_stats()  # per connection: a run that cut nothing still tells why
        done = asyncio.Event()

        async def on_cut():
            # counted first: the suite reads the file after the fault
            self.stats["resets" if self.a.fault == "reset" else "halfcloses"] += 1
            self.write_stats()
            if self.a.fault == "reset":
                abort(cwriter)
                abort(owriter)
            else:
                # FIN towards weir in the middle of the body; the origin
                # side goes away; what weir still sends is read (by the
                # other pump) and dropped until weir closes
                abort(owriter)
                try:
                    await cwriter.drain()
                    cwriter.write_eof()
                except OSError:
                    pass
            done.set()

        up_cut = cut if self.a.direction == "up" else None
        down_cut = cut if self.a.direction == "down" else None
        up = asyncio.ensure_future(self.pump(creader, owriter, up_cut, on_cut))
        down = asyncio.ensure_future(self.pump(oreader, cwriter, down_cut, on_cut))
        try:
            await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
            if done.is_set() and self.a.fault == "halfclose":
                # half-closed: held until weir closes its side (bounded)
                await asyncio.wait([up], timeout=HALF_CLOSE_HOLD)
            elif down.done():
                # the origin finished (or the reset fired): the client side ends
                await asyncio.wait([up], timeout=1.0)
            else:
                await asyncio.wait([down], timeout=HALF_CLOSE_HOLD)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for t in (up, down):
                if not t.done():
                    t.cancel()
            for w in (cwriter, owriter):
                try:
                    w.close()
                except OSError:
                    pass


async def drain_reader(reader):
    while await reader.read(65536):
        pass


def abort(writer):
    """Closes with a reset: SO_LINGER 0, then close."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


def split_addr(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


async def main_async(a):
    relay = Relay(a)
    relay.write_stats()
    host, port = split_addr(a.listen)
    server = await asyncio.start_server(relay.handle, host, port, backlog=1024, reuse_address=True)
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    server.close()
    relay.write_stats()


def main():
    ap = argparse.ArgumentParser(description="the chaos suite's fault relay")
    ap.add_argument("--listen", required=True)
    ap.add_argument("--to", required=True)
    ap.add_argument("--delay", type=float, default=0.0, help="ms added to every chunk")
    ap.add_argument("--jitter", type=float, default=0.0, help="+- ms around --delay")
    ap.add_argument("--fault", choices=("reset", "halfclose"), default=None)
    ap.add_argument("--direction", choices=("down", "up"), default="down",
                    help="count the bytes towards weir (responses) or towards the origin (uploads)")
    ap.add_argument("--share", type=float, default=0.3, help="share of connections cut")
    ap.add_argument("--cut-min", type=int, default=1000)
    ap.add_argument("--cut-max", type=int, default=200000)
    ap.add_argument("--stats", default=None)
    a = ap.parse_args()
    a.to_host, a.to_port = split_addr(a.to)
    if a.direction == "up" and a.fault == "halfclose":
        ap.error("--direction up cuts with a reset only")
    asyncio.run(main_async(a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
