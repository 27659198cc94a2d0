// Message sequence numbers: 64-bit, per session and direction, starting at 1 (0 means
// "nothing yet"). Compared wrap-safe (serial number arithmetic, RFC 1982 style): a is
// after b when the signed difference a - b is positive, so a session that somehow sent
// 2^64 messages keeps ordering as long as no two live numbers are 2^63 apart.
//
// Threading: pure functions.
#pragma once

#include <cstdint>

namespace rmsg::wire {

using Seq = std::uint64_t;

constexpr bool seq_after(Seq a, Seq b) noexcept {
  return static_cast<std::int64_t>(a - b) > 0;
}
constexpr bool seq_at_or_before(Seq a, Seq b) noexcept {
  return !seq_after(a, b);
}
// The later of two numbers (wrap-safe).
constexpr Seq seq_max(Seq a, Seq b) noexcept {
  return seq_after(a, b) ? a : b;
}

}  // namespace rmsg::wire
