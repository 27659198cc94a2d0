"""redis-server 7.0 under the shim (epoll, accept4, fork for BGSAVE) with redis-cli and
redis-benchmark under it too; every value read back byte-exact.

- set_get: binary values of many lengths (NUL, CR LF, every byte value, 0 B to 1 MiB) go in
  through `redis-cli --pipe` (raw RESP on stdin) and one through `redis-cli -x SET` (stdin
  as the last argument), and come back through `redis-cli --raw MGET`, whose output is each
  value followed by a newline: compared byte for byte with what the test expects.
- benchmark: redis-benchmark PING/SET/GET (epoll, many connections); each test reports a
  rate, and the value its SETs left behind has the asked length.
- bgsave_fork: with a per-key save delay the BGSAVE child lives about a second; while it
  does, the server must answer (on a connection opened before the fork and on new ones, and
  redis-benchmark keeps running through it without an error); afterwards the dump must
  exist and hold every value, which a second redis-server loading it proves; the server's
  RMSG_STATS lines are all its own (the child reports nothing), and the connection open
  across the fork is counted exactly as the test's client saw it.
- set_get's redis-cli: its one RMSG_STATS line is exactly the MGET request and reply.
The redis-servers listen on free ports (never 6379), with no save points and no AOF.
"""

import os
import socket
import sys
import time

import harness
from harness import check

DEADLINE_S = 20


def start_server(session, port, extra=(), shim=True, dbfile="dump.rdb"):
    server = session.start(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                            "--dir", session.workdir, "--dbfilename", dbfile, "--save", "",
                            "--appendonly", "no", "--protected-mode", "no"] + list(extra),
                           shim=shim)
    harness.wait_until(lambda: harness.listening(port) or server.poll() is not None, DEADLINE_S,
                       "redis-server to listen")
    check(server.poll() is None, f"redis-server exited early: {server.returncode}")
    return server


def stop_server(session, port, server):
    """SHUTDOWN NOSAVE, then the server must exit by itself, with status 0."""
    session.run_to_end(["redis-cli", "-p", str(port), "SHUTDOWN", "NOSAVE"], DEADLINE_S)
    check(session.wait_exit(server, DEADLINE_S) == 0, f"redis-server exited {server.returncode}")


def cli(session, port, args, input=None, shim=True):
    rc, out, err = session.run_to_end(["redis-cli", "-p", str(port)] + args, DEADLINE_S,
                                      shim=shim, input=input)
    check(rc == 0, f"redis-cli {args[:3]} exited {rc}: {err[-300:]!r}")
    return out


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RespClient:
    """A plain (not shimmed) RESP client on one connection that stays open across a fork."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
        self.buf = b""
        self.sent = self.received = 0  # bytes on the wire, to hold against RMSG_STATS

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            check(chunk, "redis closed the connection")
            self.received += len(chunk)
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            check(chunk, "redis closed the connection")
            self.received += len(chunk)
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def call(self, *args):
        request = resp(*args)
        self.sock.sendall(request)
        self.sent += len(request)
        line = self._line()
        kind, rest = line[:1], line[1:]
        check(kind != b"-", f"redis error: {rest!r}")
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        return rest

    def close(self):
        self.sock.close()


def values(seed, count):
    rng = harness.rng_for(seed, "redis-values")
    vals = [b"", b"\x00", b"\r\n", bytes(range(256)), b"\n\n\x00\r", rng.randbytes(1 << 20)]
    while len(vals) < count:
        vals.append(rng.randbytes(int(rng.lognormvariate(5, 2)) % 70000))
    return vals


def load(session, port, vals, prefix):
    commands = b"".join(resp("SET", f"{prefix}{i}", v) for i, v in enumerate(vals))
    out = cli(session, port, ["--pipe"], input=commands)
    check(b"errors: 0, replies: %d" % len(vals) in out, f"--pipe: {out[-200:]!r}")


def read_back(session, port, vals, prefix, shim=True):
    keys = [f"{prefix}{i}" for i in range(len(vals))]
    out = cli(session, port, ["--raw", "MGET"] + keys, shim=shim)
    expected = b"".join(v + b"\n" for v in vals)
    if out != expected:
        got_len = len(out)
        first = next((i for i in range(min(got_len, len(expected))) if out[i] != expected[i]),
                     min(got_len, len(expected)))
        raise harness.Failure(f"MGET: {got_len} bytes, expected {len(expected)}; "
                              f"first difference at byte {first}")


def set_get(session, seed):
    port = harness.free_port()
    server = start_server(session, port)
    vals = values(seed, 300)
    load(session, port, vals, "k")
    odd = harness.rng_for(seed, "redis-x").randbytes(100000) + b"\x00\r\n"
    check(cli(session, port, ["-x", "SET", "x"], input=odd).strip() == b"OK", "SET -x")
    vals.append(odd)
    keys = [f"k{i}" for i in range(len(vals) - 1)] + ["x"]
    out = cli(session, port, ["--raw", "MGET"] + keys)
    check(out == b"".join(v + b"\n" for v in vals), "MGET read back other bytes")
    # The shim counted exactly the request redis-cli sent and the reply it read.
    lines = session.stats(session.last)
    if lines is not None:
        reply = b"*%d\r\n" % len(vals) + b"".join(b"$%d\r\n%s\r\n" % (len(v), v) for v in vals)
        check(len(lines) == 1 and lines[0]["bytes_out"] == len(resp("MGET", *keys))
              and lines[0]["bytes_in"] == len(reply), f"redis-cli's RMSG_STATS: {lines}")
    check(cli(session, port, ["DBSIZE"]).strip() == str(len(vals)).encode(), "DBSIZE")
    stop_server(session, port, server)


def benchmark_rates(out):
    rates = {}
    for line in out.decode().splitlines()[1:]:
        fields = [f.strip('"') for f in line.split(",")]
        rates[fields[0]] = float(fields[1])
    return rates


def benchmark(session, seed):
    port = harness.free_port()
    server = start_server(session, port)
    rc, out, err = session.run_to_end(
        ["redis-benchmark", "-p", str(port), "-t", "ping,set,get", "-n", "10000", "-c", "20",
         "-d", "37", "--csv"], DEADLINE_S)
    check(rc == 0, f"redis-benchmark exited {rc}: {err[-300:]!r}")
    rates = benchmark_rates(out)
    for test in ("PING_INLINE", "PING_MBULK", "SET", "GET"):
        check(rates.get(test, 0) > 0, f"redis-benchmark: no {test} rate in {out[-400:]!r}")
    value = cli(session, port, ["--raw", "GET", "key:__rand_int__"])
    check(len(value) == 38, f"benchmark SET left {len(value) - 1} bytes, not -d 37")
    stop_server(session, port, server)


def info_field(session, port, name):
    for line in cli(session, port, ["INFO", "persistence"]).decode().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise harness.Failure(f"INFO persistence has no {name}")


def bgsave_fork(session, seed):
    port = harness.free_port()
    server = start_server(session, port)
    vals = values(seed, 1000)
    load(session, port, vals, "k")
    before = RespClient(port)  # accepted before the fork: the child inherits it
    check(before.call("PING") == b"PONG", "PING before BGSAVE")
    check(cli(session, port, ["CONFIG", "SET", "rdb-key-save-delay", "700"]).strip() == b"OK",
          "CONFIG SET rdb-key-save-delay")
    bench = session.start(["redis-benchmark", "-p", str(port), "-t", "set,get", "-n", "30000",
                           "-c", "8", "-r", "1000", "--csv"])
    check(cli(session, port, ["BGSAVE"]).strip().startswith(b"Background saving started"),
          "BGSAVE did not start")
    check(info_field(session, port, "rdb_bgsave_in_progress") == "1", "no BGSAVE child")
    # While the child runs: old and new connections are served, byte-exact.
    answered_during = 0
    rng = harness.rng_for(seed, "during")
    while info_field(session, port, "rdb_bgsave_in_progress") == "1":
        v = rng.randbytes(rng.randrange(1, 5000))
        check(before.call("SET", "during", v) == b"OK", "SET during BGSAVE")
        check(before.call("GET", "during") == v, "GET during BGSAVE read other bytes")
        check(before.call("GET", "k5") == vals[5], "GET k5 during BGSAVE")
        answered_during += 1
        check(answered_during < 100000, "BGSAVE never ended")
    check(answered_during >= 3, f"only {answered_during} rounds while the child lived")
    check(info_field(session, port, "rdb_last_bgsave_status") == "ok", "BGSAVE failed")
    dump = os.path.join(session.workdir, "dump.rdb")
    with open(dump, "rb") as f:
        check(f.read(5) == b"REDIS", "dump.rdb is not an RDB file")
    # After the child exited: the inherited connection still works, for reads and writes.
    check(before.call("PING") == b"PONG", "PING after BGSAVE")
    check(before.call("GET", "k7") == vals[7], "GET after BGSAVE")
    before_port = before.sock.getsockname()[1]
    before.close()
    check(cli(session, port, ["CONFIG", "SET", "rdb-key-save-delay", "0"]).strip() == b"OK",
          "CONFIG SET")
    check(session.wait_exit(bench, DEADLINE_S) == 0, "redis-benchmark failed across the fork")
    with open(bench.log + ".out", "rb") as f:
        rates = benchmark_rates(f.read())
    check(rates.get("SET", 0) > 0 and rates.get("GET", 0) > 0, f"benchmark rates {rates}")
    read_back(session, port, vals, "k")
    stop_server(session, port, server)
    # The BGSAVE child inherited every connection and reported none; the connection it
    # shared with the server carried, as the server's shim counted, exactly what went over it.
    lines = session.stats(server)
    if lines is not None:
        check(lines and all(line["pid"] == server.pid for line in lines),
              f"RMSG_STATS lines from other processes than the server: {lines}")
        mine = [line for line in lines if line["peer"].endswith(f":{before_port}")]
        check(len(mine) == 1 and mine[0]["bytes_in"] == before.sent
              and mine[0]["bytes_out"] == before.received,
              f"the connection across the fork: {mine}, sent {before.sent}, "
              f"received {before.received}")
    # The dump holds every value: a second server loads it (benchmark keys aside).
    os.rename(dump, os.path.join(session.workdir, "copy.rdb"))
    port2 = harness.free_port()
    server2 = start_server(session, port2, dbfile="copy.rdb")
    harness.wait_until(lambda: info_field(session, port2, "loading") == "0", DEADLINE_S,
                       "the dump to load")
    read_back(session, port2, vals, "k")
    stop_server(session, port2, server2)


CASES = {"set_get": set_get, "benchmark": benchmark, "bgsave_fork": bgsave_fork}

if __name__ == "__main__":
    sys.exit(harness.main(CASES))
