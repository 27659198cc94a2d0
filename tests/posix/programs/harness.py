"""Shared helpers of the real-program tests (tests/posix/programs/*_test.py).

Each test is one script run by /usr/bin/python3 (Debian's, never a pyenv shim), not under
the shim itself: it starts the unmodified Debian programs with `rmsg-run` in front (the
`--run` argument; empty runs them plain, which is how the harness was debugged and how
the mixed-pair test starts its plain side), waits for them without sleeping blindly
(until a condition or a deadline), checks what they wrote, and fails with a message.

A program under the shim writes its RMSG_STATS lines to a file of its own
(`Session.stats(p)`), so a test can check that the shim saw every byte the program moved.

Every program runs in its own session, so a test can tell afterwards whether anything it
started (or anything those forked) is still alive: `Session.leftovers()`.

Randomness comes from RMSG_TEST_SEED (decimal or 0x-hex; fresh when unset), printed first,
with the line that reruns the test printed on failure, as the C++ tests do.
"""

import argparse
import hashlib
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

PYTHON = "/usr/bin/python3"


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def test_seed():
    text = os.environ.get("RMSG_TEST_SEED")
    if text:
        return int(text, 0)
    return int.from_bytes(os.urandom(8), "little")


def rng_for(seed, what):
    """A generator for one use, derived from the test seed and a name (like kit/seed.h)."""
    digest = hashlib.sha256(f"{seed}:{what}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def free_port():
    """A TCP port nothing listens on now (the kernel's pick; tests never use fixed ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """Whether some socket listens on `port` (read from /proc/net/tcp{,6}: probing with a
    connect would be a client to programs such as iperf3, which serve exactly one)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, state = fields[1], fields[3]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        return True
        except FileNotFoundError:
            pass
    return False


def wait_until(cond, deadline_s, what, poll_s=0.005):
    """Runs cond() until it is true or the deadline passes (then fails naming `what`)."""
    end = time.monotonic() + deadline_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > end:
            raise Failure(f"timed out after {deadline_s} s waiting for {what}")
        time.sleep(poll_s)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


class Session:
    """The programs one test started: each in its own session, all reaped at the end."""

    def __init__(self, run, workdir, stats=True):
        self.run = run  # list: the wrapper in front of a program under the shim
        self.workdir = workdir
        self.with_stats = stats  # False: shimmed programs run without RMSG_STATS
        self.procs = []
        self.names = itertools.count()  # log names; tests may start programs from threads

    def start(self, argv, shim=True, env=None, **kw):
        cmd = (self.run if shim else []) + argv
        # A long-lived program logs to files (a pipe nobody reads would stall it).
        log = os.path.join(self.workdir, f"{next(self.names)}-{os.path.basename(argv[0])}")
        full_env = dict(os.environ)
        full_env.pop("RMSG_STATS", None)
        if shim and self.run and self.with_stats:
            # The shim's per-connection lines (pid, peer, transport, bytes_in, bytes_out).
            full_env["RMSG_STATS"] = log + ".stats"
        full_env.update(env or {})
        opened = []
        for stream, ext in (("stdout", ".out"), ("stderr", ".err")):
            if stream not in kw:
                kw[stream] = open(log + ext, "wb")
                opened.append(kw[stream])
        try:
            p = subprocess.Popen(cmd, cwd=self.workdir, env=full_env, start_new_session=True, **kw)
        finally:
            for f in opened:
                f.close()
        p.argv_text = " ".join(cmd)
        p.log = log
        p.shimmed = bool(shim and self.run)
        self.procs.append(p)
        return p

    def stats(self, p):
        """The RMSG_STATS lines of a shimmed program (None when it ran plain), after it exited:
        one per connection it owned, written at close or at exit."""
        if not p.shimmed or not self.with_stats:
            return None
        try:
            with open(p.log + ".stats") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def run_to_end(self, argv, deadline_s, shim=True, input=None, env=None):
        """Runs a program to its exit within the deadline; returns (rc, stdout, stderr)."""
        p = self.start(argv, shim=shim, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        self.last = p
        try:
            out, err = p.communicate(input=input, timeout=deadline_s)
        except subprocess.TimeoutExpired:
            raise Failure(f"`{p.argv_text}` did not exit within {deadline_s} s")
        return p.returncode, out, err

    def wait_exit(self, p, deadline_s):
        try:
            return p.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            raise Failure(f"`{p.argv_text}` (pid {p.pid}) did not exit within {deadline_s} s")

    def sids(self):
        return {p.pid for p in self.procs}

    def leftovers(self):
        """Live processes (not zombies) in any session this test started."""
        mine = self.sids()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            state, sid = fields[0], int(fields[3])
            if sid in mine and state != "Z":
                found.append(int(entry))
        return found

    def print_logs(self, p, limit=2000):
        """The tail of a program's log files (after a failure)."""
        for ext in (".out", ".err"):
            try:
                with open(p.log + ext, "rb") as f:
                    text = f.read()[-limit:].decode(errors="replace")
            except OSError:
                continue
            if text.strip():
                print(f"       {p.argv_text} {ext[1:]}:\n{text}", flush=True)

    def close(self):
        """Kills what is still running (every session) and reaps our children."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.communicate(timeout=5)
            except (subprocess.TimeoutExpired, ValueError):
                pass


def main(cases):
    """Runs the named cases (all by default): `SCRIPT --run 'WRAPPER' [CASE...]`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", default="",
                        help="wrapper run in front of a program under the shim (rmsg-run); "
                             "empty: plain programs")
    parser.add_argument("--no-stats", action="store_true",
                        help="run shimmed programs without RMSG_STATS (no stats checks)")
    parser.add_argument("cases", nargs="*")
    args = parser.parse_args()
    seed = test_seed()
    print(f"RMSG_TEST_SEED={seed}", flush=True)
    run = args.run.split() if args.run else []
    if run and not os.access(run[0], os.X_OK):
        print(f"FAIL: the shim wrapper {run[0]} is not an executable", flush=True)
        return 1
    names = args.cases or list(cases)
    failed = []
    for name in names:
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"rmsg-{name}-") as workdir:
            session = Session(run, workdir, stats=not args.no_stats)
            try:
                cases[name](session, seed)
                left = session.leftovers()
                check(not left, f"processes left behind: {left}")
                print(f"[ ok ] {name} ({time.monotonic() - start:.1f} s)", flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is reported the same way
                failed.append(name)
                if not isinstance(e, Failure):
                    traceback.print_exc()
                print(f"[FAIL] {name}: {e}", flush=True)
                for p in session.procs:
                    if p.poll() is None:
                        print(f"       still running: {p.argv_text}", flush=True)
                    session.print_logs(p)
            finally:
                session.close()
    for name in failed:
        print(f"[ rerun ] RMSG_TEST_SEED={seed} {PYTHON} {sys.argv[0]} "
              f"--run '{args.run}'{' --no-stats' if args.no_stats else ''} {name}", flush=True)
    return 1 if failed else 0
