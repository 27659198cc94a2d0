#!/usr/bin/env python3
"""iperf3's bytes across two guests (upgrade_two_host.sh): the receiver's -F file (every
byte it read) must be a source file's first bytes (both guests make it from one seed), or
zeros for -Z (iperf3 3.12 sendfile()s a zero-filled buffer file).

  upgrade_two_host_bytes.py make PATH SEED SIZE
  upgrade_two_host_bytes.py check RECEIVED SOURCE|zeros MIN_BYTES"""
import random
import sys


def main():
    if sys.argv[1] == "make":
        path, seed, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        with open(path, "wb") as f:
            f.write(random.Random(seed).randbytes(size))
        return 0
    received, source, least = sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(received, "rb") as f:
        got = f.read()
    if source == "zeros":
        want = bytes(len(got))
    else:
        with open(source, "rb") as f:
            want = f.read(len(got))
    if got != want:
        first = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
            if len(want) == len(got) else len(want)
        print("received byte %d (of %d) differs from the source's" % (first, len(got)))
        return 1
    if len(got) < least:
        print("received %d bytes, expected at least %d" % (len(got), least))
        return 1
    print("%d bytes received, every one checked" % len(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
