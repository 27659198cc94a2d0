"""A Python asyncio echo server and client (echo_server.py, echo_client.py), both run by
Debian's /usr/bin/python3 under the shim: epoll (the selector loop), socketpair wakeups
(run_in_executor), vfork/close_range (a `sha256sum` subprocess per HASH request while
connections are open). The client checks every answer; this test recomputes, from the
same seed, the count and digest of every byte the client says came back, and each side's
RMSG_STATS line per connection (bytes out and in, exactly).
"""

import hashlib
import os
import sys

import harness
from harness import check

import echo_client

HERE = os.path.dirname(os.path.abspath(__file__))
DEADLINE_S = 30
CONNECTIONS = 6
MESSAGES = 24


def expected(seed):
    """The client's output line, and what each connection carries (out, in) in bytes."""
    digest = hashlib.sha256()
    total = 0
    conns = []
    for c in range(CONNECTIONS):
        out = inn = 0
        for op, body in echo_client.payloads(seed, c, MESSAGES):
            out += 12 + len(body)
            inn += len(body) if op == b"ECHO" else 64
            if op == b"ECHO":
                digest.update(body)
                total += len(body)
        conns.append((out, inn))
    conns.append((12, 0))  # STOP
    return f"received {total} {digest.hexdigest()}", conns


def check_stats(lines, conns, who, outgoing):
    """Each connection's RMSG_STATS line carries exactly the requests and answers."""
    if lines is None:
        return  # ran plain
    key = (lambda line: (line["bytes_out"], line["bytes_in"])) if outgoing else (
        lambda line: (line["bytes_in"], line["bytes_out"]))
    got = sorted(key(line) for line in lines)
    check(got == sorted(conns), f"{who}: RMSG_STATS {got}, expected {sorted(conns)}")


def echo_pair(session, seed, server_shim=True, client_shim=True):
    port = harness.free_port()
    server = session.start([harness.PYTHON, os.path.join(HERE, "echo_server.py"), str(port)],
                           shim=server_shim)
    harness.wait_until(lambda: harness.listening(port) or server.poll() is not None, DEADLINE_S,
                       "echo_server.py to listen")
    check(server.poll() is None, f"echo_server.py exited early: {server.returncode}")
    client_seed = harness.rng_for(seed, "echo").getrandbits(63)
    rc, out, err = session.run_to_end(
        [harness.PYTHON, os.path.join(HERE, "echo_client.py"), str(port), str(client_seed),
         str(CONNECTIONS), str(MESSAGES)], DEADLINE_S, shim=client_shim)
    check(rc == 0, f"echo_client.py exited {rc}: {err.decode(errors='replace')[-1500:]}")
    client = session.last
    want, conns = expected(client_seed)
    check(out.decode().strip() == want, f"client: {out.decode().strip()!r}, expected {want!r}")
    check(session.wait_exit(server, DEADLINE_S) == 0, f"echo_server.py exited {server.returncode}")
    check_stats(session.stats(client), conns, "client", outgoing=True)
    check_stats(session.stats(server), conns, "server", outgoing=False)


CASES = {"echo": echo_pair}

if __name__ == "__main__":
    sys.exit(harness.main(CASES))
