"""The asyncio echo client, a program under test (run by /usr/bin/python3, under the shim).

    echo_client.py PORT SEED CONNECTIONS MESSAGES

Opens CONNECTIONS connections at once; on each sends MESSAGES random payloads (sizes
log-uniform from 1 B to 1 MiB, drawn from SEED, see payloads()) as ECHO, HASH or THRD
requests (echo_server.py), checks every answer, then sends STOP on a last connection.
Prints one line `received BYTES SHA256`: the count and the digest of every echoed byte in
order (connection by connection), which the test computes on its own from the same seed.
Exits 1 at the first wrong answer.
"""

import asyncio
import hashlib
import random
import struct
import sys


def payloads(seed, conn, messages):
    """(op, payload) pairs of one connection; echo_test.py calls this too."""
    rng = random.Random(f"{seed}:{conn}")
    out = []
    for i in range(messages):
        size = int(2 ** rng.uniform(0, 20))
        op = b"HASH" if i % 7 == 3 else b"THRD" if i % 5 == 2 else b"ECHO"
        out.append((op, rng.randbytes(size)))
    return out


async def one_connection(port, items):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    echoed = []
    for op, body in items:
        writer.write(op + struct.pack(">Q", len(body)))
        writer.write(body)
        await writer.drain()
        if op == b"ECHO":
            got = await reader.readexactly(len(body))
            if got != body:
                raise RuntimeError(f"echo of {len(body)} bytes came back different")
            echoed.append(got)
        else:
            got = await reader.readexactly(64)
            if got.decode() != hashlib.sha256(body).hexdigest():
                raise RuntimeError(f"{op.decode()} of {len(body)} bytes: wrong digest")
    writer.close()
    await writer.wait_closed()
    return echoed


async def main(port, seed, connections, messages):
    results = await asyncio.gather(*(one_connection(port, payloads(seed, c, messages))
                                      for c in range(connections)))
    digest = hashlib.sha256()
    total = 0
    for echoed in results:
        for body in echoed:
            digest.update(body)
            total += len(body)
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"STOP" + struct.pack(">Q", 0))
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    print(f"received {total} {digest.hexdigest()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*(int(a) for a in sys.argv[1:5]))))
