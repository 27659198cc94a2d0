"""SIGINT at random points of an iperf3 run, 50 runs, both sides under the shim: no hang.

Each run starts `iperf3 -s -1` and, once it listens, `iperf3 -c -t 1` (with -R, -Z or -P 2
drawn at random), then after a random delay (0 to 1.2 s from the client's start, a third
of them in the first 20 ms: during connect and the parameter exchange, most during the
transfer, some after the end) sends SIGINT to
the client, the server or both. What must hold (measured as exits, never as time taken):
- each signalled program exits within EXIT_S, and not by a crash (a signal other than
  SIGINT itself, which kills one that has not installed iperf3's handler yet);
- the other one then exits by itself within OWN_EXIT_S (iperf3 tells its peer it was
  interrupted, or sees the connection end) - unless it may never have had a peer (a
  client interrupted before it connected leaves `-s -1` waiting for one; one killed by
  SIGINT before iperf3 set its handler is taken to be such), in which case it gets SIGINT
  too and must exit within EXIT_S;
- nothing either started is left running (iperf3 forks nothing; a shim that did, or a
  stuck process, fails the run).
Runs go RUNS_AT_ONCE at a time on their own ports; the seed picks every delay and target.
"""

import concurrent.futures
import signal
import subprocess
import sys
import time

import harness
from harness import check

RUNS = 50
RUNS_AT_ONCE = 5
EXIT_S = 10
OWN_EXIT_S = 5


def exited_cleanly(p, who):
    rc = p.returncode
    check(rc >= 0 or rc == -signal.SIGINT, f"{who} died of signal {-rc}")


def wait(p, deadline):
    try:
        p.wait(timeout=deadline)
        return True
    except subprocess.TimeoutExpired:
        return False


def one_run(session, seed, i):
    began = time.monotonic()
    rng = harness.rng_for(seed, f"sigint-run-{i}")
    target = rng.choice(["client", "server", "both"])
    # One in three lands in the first 20 ms (connect, parameter exchange), the rest anywhere.
    delay = rng.uniform(0, 0.02) if rng.random() < 1 / 3 else rng.uniform(0, 1.2)
    extra = rng.choice([[], ["-R"], ["-Z"], ["-P", "2"]])
    port = harness.free_port()
    server = session.start(["iperf3", "-s", "-1", "-p", str(port)])
    harness.wait_until(lambda: harness.listening(port) or server.poll() is not None, EXIT_S,
                       f"run {i}: iperf3 -s to listen")
    client = session.start(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "1"] + extra)
    client_done = wait(client, delay)
    signalled = {"client": [client], "server": [server], "both": [client, server]}[target]
    others = [p for p in (client, server) if p not in signalled]
    for p in signalled:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    what = f"run {i} ({target} at {delay:.3f} s, {' '.join(extra) or 'plain'})"
    for p in signalled:
        check(wait(p, EXIT_S), f"{what}: signalled {p.argv_text} still runs after {EXIT_S} s")
        exited_cleanly(p, what)
    for p in others:
        # A client killed by SIGINT's default action (before iperf3 set its handler) told
        # the server nothing and may not have connected: the server may wait on for it.
        early = client in signalled and client.returncode == -signal.SIGINT
        own_exit_s = 0 if early else OWN_EXIT_S
        if not wait(p, own_exit_s):
            # Only a server whose client never reached it may wait on.
            check(p is server, f"{what}: the client hangs after the server's exit")
            p.send_signal(signal.SIGINT)
            check(wait(p, EXIT_S), f"{what}: the server ignores SIGINT")
        exited_cleanly(p, what)
    return f"{what}: client {client.returncode}, server {server.returncode}, " \
        f"{time.monotonic() - began:.2f} s" + (
        " (client done before the signal)" if client_done else "")


def sigint_runs(session, seed):
    with concurrent.futures.ThreadPoolExecutor(RUNS_AT_ONCE) as pool:
        results = list(pool.map(lambda i: one_run(session, seed, i), range(RUNS)))
    for line in results:
        print("       " + line, flush=True)


CASES = {"sigint_runs": sigint_runs}

if __name__ == "__main__":
    sys.exit(harness.main(CASES))
