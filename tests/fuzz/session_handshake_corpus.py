#!/usr/bin/env python3
"""Writes the committed seeds of the session_handshake fuzz target (corpus/session_handshake/):
one input per rule of the acceptor's decision order (src/msg/reconnect_decision.h), in the
layout session_handshake_fuzzer.cc reads. Run from the repository root."""
import os
import struct

OUT = "tests/fuzz/corpus/session_handshake"


def view(me, exists, my_cookie, peer_cookie, peer_gs, cs, outbound, out_cs):
    return struct.pack("<QBQQQQBQ", me, exists, my_cookie, peer_cookie, peer_gs, cs, outbound, out_cs)


def hello(node, target, ccookie, scookie, gs, cs, msg_seq, flags=0):
    return struct.pack("<QQQQQQQII", node, target, ccookie, scookie, gs, cs, msg_seq, flags, 0)


M = (1 << 64) - 1
SEEDS = {
    "new_session": view(10, 0, 0, 0, 0, 0, 0, 0) + hello(20, 10, 222, 0, 1, 1, 0),
    "reconnect": view(10, 1, 111, 222, 5, 3, 0, 0) + hello(20, 10, 222, 111, 6, 4, 7),
    "old_global_seq": view(10, 1, 111, 222, 5, 3, 0, 0) + hello(20, 10, 222, 111, 5, 4, 0),
    "old_connect_seq": view(10, 1, 111, 222, 5, 3, 0, 0) + hello(20, 10, 222, 111, 6, 3, 0),
    "race_equal": view(10, 1, 111, 222, 5, 3, 1, 4) + hello(20, 10, 222, 111, 6, 4, 0),
    "race_low_id_peer": view(30, 1, 111, 222, 5, 3, 1, 4) + hello(20, 30, 222, 111, 6, 4, 0),
    "peer_restarted": view(10, 1, 111, 222, 5, 3, 0, 0) + hello(20, 10, 333, 0, 1, 1, 0),
    "we_restarted": view(10, 0, 0, 0, 0, 0, 0, 0) + hello(20, 10, 222, 111, 6, 4, 0),
    "lost_server_ident": view(10, 1, 111, 222, 5, 3, 0, 0) + hello(20, 10, 222, 0, 6, 4, 0),
    "wrap": view(10, 1, 111, 222, M, M, 1, M) + hello(20, 10, 222, 111, 0, 0, M, 1),
    "short_payload": view(10, 1, 111, 222, 5, 3, 0, 0) + b"\x01" * 10,
    "half_apart": view(10, 1, 111, 222, 5, 3, 1, 1 << 63) + hello(20, 10, 222, 111, 6, 0, 0),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"wrote {len(SEEDS)} seeds to {OUT}")
