// The routing peek at an inbound connection's first bytes: the banner, the first frame's
// preamble and the hello's node field (docs/protocol.md, Messenger). Pure: the bytes come
// from a MSG_PEEK of a socket nobody has read yet (msg/accept_router.h); the banner is
// checked in full as the session would check it, the hello only as far as its sender.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/session_frames.h"

namespace rmsg::wire {

// What the first bytes of an inbound connection say.
struct HelloPeek {
  enum class Verdict : std::uint8_t { need_more, node, malformed };
  Verdict verdict = Verdict::need_more;
  std::size_t need = 0;  // need_more: the bytes to wait for in all
  NodeId node = 0;       // node: the hello's sender, or the banner's auth field's node
};
HelloPeek peek_hello(std::span<const std::byte> head) noexcept;
// The most bytes peek_hello() ever asks for (a banner with the longest extension, a
// preamble and the hello's node field).
std::size_t peek_hello_cap() noexcept;

}  // namespace rmsg::wire
