"""iperf3 3.12 server and client on loopback, both under the shim (select, TCP_INFO,
sendfile with -Z, reverse with -R), every byte checked where iperf3 allows.

What iperf3 lets a test check, and what it does not:
- `-F FILE` on the receiver writes every byte it read to FILE; on the sender it sends FILE
  (the client then sends the whole file and stops). So the receiver's file must be a prefix
  of the sender's, as long as the receiver's JSON says it received.
- The JSON's `sum_sent.bytes` counts what the sender handed to write(); `sum_received`
  what the receiver read before the test's end message stopped it. Plain iperf3 3.12 on
  plain loopback reports them unequal in most runs (what is still in the socket buffers is
  never read), so the check is received <= sent, and == where the sender finishes before the
  end (the whole -F file in reverse mode, with -t running on past it).
- With -Z the sender sendfile()s from its private temporary buffer file, which 3.12 fills
  through a MAP_PRIVATE mapping, so the file and hence every byte on the wire is zero; with
  -F and -Z together the content is that file's, not -F's. The -Z case checks for zeros.
- TCP_INFO: the sender's per-stream `max_snd_cwnd` and `max_rtt` come from
  getsockopt(TCP_INFO); zero would mean the option failed under the shim.
"""

import json
import os
import sys

import harness
from harness import check

DEADLINE_S = 20


def write_source(session, seed, size):
    data = harness.rng_for(seed, "iperf3-source").randbytes(size)
    path = os.path.join(session.workdir, "source.bin")
    with open(path, "wb") as f:
        f.write(data)
    return path, data


def start_server(session, port, args, shim=True):
    server = session.start(["iperf3", "-s", "-1", "-J", "-p", str(port)] + args, shim=shim)
    harness.wait_until(lambda: harness.listening(port) or server.poll() is not None, DEADLINE_S,
                       "iperf3 -s to listen")
    check(server.poll() is None, f"iperf3 -s exited early: {server.returncode}")
    return server


def report(text, who):
    try:
        j = json.loads(text)
    except json.JSONDecodeError as e:
        raise harness.Failure(f"{who}: no JSON report ({e}): {text[:400]!r}")
    check("error" not in j, f"{who} reports an error: {j.get('error')}")
    return j


def run_pair(session, server_args, client_args, server_shim=True, client_shim=True):
    """One iperf3 test; returns the client's and the server's JSON reports."""
    port = harness.free_port()
    server = start_server(session, port, server_args, shim=server_shim)
    rc, out, err = session.run_to_end(
        ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J"] + client_args, DEADLINE_S,
        shim=client_shim)
    check(rc == 0, f"iperf3 -c exited {rc}: {out[-400:]!r} {err[-400:]!r}")
    client = report(out.decode(), "client")
    check(session.wait_exit(server, DEADLINE_S) == 0, f"iperf3 -s exited {server.returncode}")
    with open(server.log + ".out", "rb") as f:
        server_report = report(f.read().decode(), "server")
    return client, server_report


def sender_tcp_info(j, who):
    for s in j["end"]["streams"]:
        sender = s["sender"]
        check(sender["max_snd_cwnd"] > 0 and sender["max_rtt"] > 0,
              f"{who}: no TCP_INFO numbers in {sender}")


def received_file(session, name, received, source):
    with open(os.path.join(session.workdir, name), "rb") as f:
        got = f.read()
    check(received > 0, "nothing received")
    check(len(got) == received, f"receiver wrote {len(got)} bytes, reports {received}")
    if source is None:
        check(got.count(0) == len(got), "the -Z bytes are not the zeros iperf3 sends")
    else:
        check(got == source[:len(got)], "received bytes differ from the file sent")
    return got


def forward_file(session, seed, server_shim=True, client_shim=True):
    path, data = write_source(session, seed, 3 * 1024 * 1024 + 12345)
    client, server = run_pair(session, ["-F", "received.bin"], ["-F", path],
                              server_shim=server_shim, client_shim=client_shim)
    sent = client["end"]["sum_sent"]["bytes"]
    received = server["end"]["sum_received"]["bytes"]
    check(sent == len(data), f"client sent {sent} of the file's {len(data)} bytes")
    check(received <= sent, f"received {received} > sent {sent}")
    received_file(session, "received.bin", received, data)
    sender_tcp_info(client, "client")


def reverse_file(session, seed, server_shim=True, client_shim=True):
    path, data = write_source(session, seed, 4 * 1024 * 1024 - 777)
    client, server = run_pair(session, ["-F", path], ["-R", "-t", "1", "-F", "received.bin"],
                              server_shim=server_shim, client_shim=client_shim)
    sent = server["end"]["sum_sent"]["bytes"]
    received = client["end"]["sum_received"]["bytes"]
    # The server sends the whole file well inside the second, so all of it is read.
    check(sent == len(data) and received == sent,
          f"reverse: file {len(data)}, sent {sent}, received {received}")
    received_file(session, "received.bin", received, data)
    sender_tcp_info(server, "server")


def sendfile_zeros(session, seed):
    client, server = run_pair(session, ["-F", "received.bin"], ["-Z", "-n", "48M"])
    sent = client["end"]["sum_sent"]["bytes"]
    received = server["end"]["sum_received"]["bytes"]
    check(sent >= 48 * 1024 * 1024, f"-Z -n 48M sent only {sent}")
    check(received <= sent, f"received {received} > sent {sent}")
    received_file(session, "received.bin", received, None)
    sender_tcp_info(client, "client")


def parallel_time(session, seed):
    client, server = run_pair(session, [], ["-P", "2", "-t", "1"])
    streams = client["end"]["streams"]
    check(len(streams) == 2, f"{len(streams)} streams reported, 2 asked")
    for s in streams:
        check(0 < s["receiver"]["bytes"] <= s["sender"]["bytes"], f"stream counts {s}")
    check(client["end"]["sum_received"]["bytes"] == server["end"]["sum_received"]["bytes"],
          "client and server disagree on the bytes received")
    sender_tcp_info(client, "client")


CASES = {
    "forward_file": forward_file,
    "reverse_file": reverse_file,
    "sendfile_zeros": sendfile_zeros,
    "parallel_time": parallel_time,
}

if __name__ == "__main__":
    sys.exit(harness.main(CASES))
