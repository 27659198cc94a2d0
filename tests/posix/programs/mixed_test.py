"""Mixed pairs: only one side of each connection under the shim, the other a plain
program, so the shim must put on the wire exactly the bytes a kernel TCP socket would
(it never adds a byte) and accept what a plain peer sends. iperf3 with -F (every byte
checked) each way round, and the asyncio echo pair each way round.
"""

import sys

import asyncio_test
import harness
import iperf3_test


def iperf3_server_shimmed(session, seed):
    iperf3_test.forward_file(session, seed, server_shim=True, client_shim=False)
    iperf3_test.reverse_file(session, seed, server_shim=True, client_shim=False)


def iperf3_client_shimmed(session, seed):
    iperf3_test.forward_file(session, seed, server_shim=False, client_shim=True)
    iperf3_test.reverse_file(session, seed, server_shim=False, client_shim=True)


def echo_server_shimmed(session, seed):
    asyncio_test.echo_pair(session, seed, server_shim=True, client_shim=False)


def echo_client_shimmed(session, seed):
    asyncio_test.echo_pair(session, seed, server_shim=False, client_shim=True)


CASES = {
    "iperf3_server_shimmed": iperf3_server_shimmed,
    "iperf3_client_shimmed": iperf3_client_shimmed,
    "echo_server_shimmed": echo_server_shimmed,
    "echo_client_shimmed": echo_client_shimmed,
}

if __name__ == "__main__":
    sys.exit(harness.main(CASES))
