// Node ids: the 64-bit names messengers know each other by (rmsg/messenger.h). Two
// processes that talk to the same peers must not share one: the second looks like a
// restart of the first and resets its sessions. Generate one per node once, persist it
// (node_id_file() does both), and give it to MessengerOptions::node_id.
//
// Threading: every function here may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rmsg/export.h"
#include "rmsg/result.h"

namespace rmsg {

using NodeId = std::uint64_t;  // 0: none (never a node's id)

// A fresh id: 64 bits from the kernel's CSPRNG (getrandom(2), blocking only until the
// kernel's pool is first initialised, at boot), never 0. Two generated ids collide with
// probability about n^2 / 2^65 among n nodes. Errors: getrandom's errno (system category).
RMSG_EXPORT Result<NodeId> generate_node_id() noexcept;

// 16 lowercase hex digits ("00000000000000ff"): what parse_node_id reads back.
RMSG_EXPORT std::string node_id_to_string(NodeId id);
// 1 to 16 hex digits, optionally after "0x", surrounding whitespace ignored. Errors:
// Errc::invalid_argument (anything else, or 0).
RMSG_EXPORT Result<NodeId> parse_node_id(std::string_view text) noexcept;

// The id kept in the file at `path`: read it when the file exists; otherwise generate one
// and write it there: written in full to a temporary file beside it, then linked into place
// (link(2) never replaces), so a crash never leaves half an id and two processes racing on
// one path both end with the id that got there first. Blocking file I/O: call it at
// start-up, not on a loop thread. Errors: the errno of open/read/write/link (system
// category); Errc::invalid_argument when the file holds no valid id.
RMSG_EXPORT Result<NodeId> node_id_file(const std::string& path);

}  // namespace rmsg
