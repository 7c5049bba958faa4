#!/usr/bin/env python3
"""ws_origin.py: a WebSocket echo origin for weir's tunnel tests and benchmark.

Principle: the other end of a tunnel is a real WebSocket implementation
(Debian's python3-websockets), so what weir relays is checked by a parser
that is not ours: frames, masking, ping/pong and the close handshake.

    ws_origin.py --listen 127.0.0.1:PORT

Prints "ready 127.0.0.1:PORT" once listening. Every path echoes each
message back as it came (text as text, binary as binary, up to 32 MiB),
except /close/CODE, which closes at once with that code and reason "bye",
/headers, which first sends the opening handshake's request headers as a
JSON list of pairs, and /flood/N, which sends N binary messages of 64 KiB
as fast as the connection takes them.
"""

import argparse
import asyncio
import json
import sys

import websockets


async def handler(ws, path=None):
    path = path if path is not None else ws.path
    if path.startswith("/close/"):
        await ws.close(int(path.rsplit("/", 1)[1]), "bye")
        return
    if path.startswith("/headers"):
        await ws.send(json.dumps(list(ws.request_headers.raw_items())))
    if path.startswith("/flood/"):
        blob = b"f" * 65536
        try:
            for _ in range(int(path.rsplit("/", 1)[1])):
                await ws.send(blob)
        except websockets.ConnectionClosed:
            pass
        return
    try:
        async for msg in ws:
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass


async def main(host, port):
    async with websockets.serve(handler, host, port, max_size=32 << 20, max_queue=4,
                                compression=None, ping_interval=None) as server:
        got = server.sockets[0].getsockname()
        print("ready %s:%d" % (got[0], got[1]), flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:0")
    a = ap.parse_args()
    h, p = a.listen.rsplit(":", 1)
    try:
        asyncio.run(main(h, int(p)))
    except KeyboardInterrupt:
        sys.exit(0)
