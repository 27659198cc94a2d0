"""An asyncio echo server, the program under test (run by /usr/bin/python3, under the shim).

    echo_server.py PORT

Requests on each connection: a 4-byte op, an 8-byte big-endian length, that many bytes.
  ECHO  the bytes come back as they are
  HASH  the sha256 (hex) of the bytes, computed by a `sha256sum` child: a subprocess started
        while connections are open (Python 3.11's _posixsubprocess: vfork, close_range in
        the child, pipes), awaited through asyncio's child watcher
  THRD  the sha256 computed on a worker thread, whose result wakes the loop through its
        self-pipe (a socketpair): run_in_executor -> call_soon_threadsafe
  STOP  the server closes its listener and exits 0 once every connection has ended
Prints `listening` when it accepts connections.
"""

import asyncio
import hashlib
import struct
import sys
import traceback


async def serve_one(reader, writer, stop):
    try:
        while True:
            try:
                head = await reader.readexactly(12)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    raise
                return  # the client closed between requests
            op, length = head[:4], struct.unpack(">Q", head[4:])[0]
            body = await reader.readexactly(length)
            if op == b"ECHO":
                writer.write(body)
            elif op == b"HASH":
                child = await asyncio.create_subprocess_exec(
                    "/usr/bin/sha256sum", stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE)
                out, _ = await child.communicate(body)
                if child.returncode != 0:
                    raise RuntimeError(f"sha256sum exited {child.returncode}")
                writer.write(out[:64])
            elif op == b"THRD":
                digest = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: hashlib.sha256(body).hexdigest())
                writer.write(digest.encode())
            elif op == b"STOP":
                stop.set()
                return
            else:
                raise RuntimeError(f"unknown op {op!r}")
            await writer.drain()
    finally:
        writer.close()
        await writer.wait_closed()


async def main(port):
    stop = asyncio.Event()
    tasks = set()
    failures = []

    async def on_client(reader, writer):
        tasks.add(asyncio.current_task())
        try:
            await serve_one(reader, writer, stop)
        except Exception:  # noqa: BLE001 - any failure makes the exit status 1
            traceback.print_exc()
            failures.append(1)
        finally:
            tasks.discard(asyncio.current_task())

    server = await asyncio.start_server(on_client, "127.0.0.1", port)
    print("listening", flush=True)
    await stop.wait()
    server.close()
    await server.wait_closed()
    if tasks:
        await asyncio.wait(set(tasks))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(int(sys.argv[1]))))
