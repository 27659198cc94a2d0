#!/usr/bin/env python3
"""An asyncio echo pair (the socket shim's two-guest test, upgrade_two_host.sh).

  asyncio_echo.py server ADDR PORT        echoes one connection, then exits
  asyncio_echo.py client ADDR PORT BYTES  ping-pongs 64-byte messages for 2 s (long enough
                                          for the upgrade to cut over), then sends BYTES of
                                          a seeded pattern while it reads the echo; checks
                                          every byte; exit status 0 when all were right

The client retries its connect until the server listens (a deadline of 60 s)."""
import asyncio
import random
import sys
import time


async def serve(addr, port):
    done = asyncio.Event()

    failed = []

    async def handle(reader, writer):
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
            writer.close()
            await writer.wait_closed()
        except OSError as e:  # the server exits with the error instead of waiting for ever
            print("asyncio echo server: %r" % e, file=sys.stderr)
            failed.append(e)
        finally:
            done.set()

    server = await asyncio.start_server(handle, addr, port)
    async with server:
        await done.wait()
    return 1 if failed else 0


async def connect(addr, port):
    deadline = time.monotonic() + 60
    while True:
        try:
            return await asyncio.open_connection(addr, port)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)  # the server's guest may not listen yet


async def client(addr, port, n):
    reader, writer = await connect(addr, port)
    rounds = 0
    until = time.monotonic() + 2
    while time.monotonic() < until:
        msg = bytes([rounds & 0xFF]) * 64
        writer.write(msg)
        if await reader.readexactly(64) != msg:
            print("ping-pong round %d differs" % rounds, file=sys.stderr)
            return 1
        rounds += 1
    data = random.Random(port).randbytes(n)

    async def send():
        for off in range(0, n, 1 << 16):
            writer.write(data[off:off + (1 << 16)])
            await writer.drain()
        writer.write_eof()

    async def receive():
        got = bytearray()
        while True:
            chunk = await reader.read(1 << 20)
            if not chunk:
                return got
            got += chunk

    _, got = await asyncio.gather(send(), receive())
    writer.close()
    await writer.wait_closed()
    if got != data:
        first = next((i for i in range(min(len(got), n)) if got[i] != data[i]), min(len(got), n))
        print("echo differs at byte %d (%d of %d received)" % (first, len(got), n), file=sys.stderr)
        return 1
    print("asyncio echo: %d rounds, %d bytes echoed and checked" % (rounds, n))
    return 0


def main():
    role, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if role == "server":
        return asyncio.run(serve(addr, port))
    return asyncio.run(client(addr, port, int(sys.argv[4])))


if __name__ == "__main__":
    sys.exit(main())
