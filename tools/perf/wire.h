// The request a perf client sends first on every connection, before any payload. Both
// ends are rmsg-perf builds on the same architecture, so fields are in host byte order.
#pragma once

#include <cstdint>

#include "perf.h"

namespace rmsg::perf {

inline constexpr std::uint32_t kWireMagic = 0x726d7066;  // "rmpf"
inline constexpr std::uint64_t kMaxWireSize = 1ull << 30;

struct WireHeader {
  std::uint32_t magic = kWireMagic;
  std::uint32_t test = 0;   // perf::Test
  std::uint64_t size = 0;   // bytes per message
  std::uint64_t count = 0;  // messages including warmup
  // verbs bw: sends in flight and receives posted (0: the baseline's own 64 and up to
  // 256); "verbs-window" sets the stream's window here.
  std::uint32_t window = 0;
  std::uint32_t reserved = 0;
};
static_assert(sizeof(WireHeader) == 32);

// lat: the server echoes every byte; bw: it swallows count*size bytes, then sends one
// byte (the ack) so that the client's clock covers delivery, not just buffering.
inline bool valid(const WireHeader& h) {
  return h.magic == kWireMagic && (h.test == 1 || h.test == 2) && h.size > 0 &&
         h.size <= kMaxWireSize && h.count > 0 && h.count < (1ull << 40);
}

}  // namespace rmsg::perf
