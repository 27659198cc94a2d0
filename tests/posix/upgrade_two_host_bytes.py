#!/usr/bin/env python3
"""iperf3 -Z's bytes across two guests (upgrade_two_host.sh): the receiver's -F file (every
byte it read) must be zeros, as iperf3 3.12 sendfile()s them from a zero-filled buffer
file, and at least MIN_BYTES of them.

  upgrade_two_host_bytes.py check RECEIVED zeros MIN_BYTES"""
import sys


def main():
    received, source, least = sys.argv[2], sys.argv[3], int(sys.argv[4])
    if source != "zeros":
        print("only zeros are checked")
        return 2
    with open(received, "rb") as f:
        got = f.read()
    if got.count(0) != len(got):
        first = next(i for i, b in enumerate(got) if b != 0)
        print("received byte %d (of %d) is not zero" % (first, len(got)))
        return 1
    if len(got) < least:
        print("received %d bytes, expected at least %d" % (len(got), least))
        return 1
    print("%d bytes received, every one checked" % len(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
