// Little-endian field access for the messenger's wire structures (banner, preamble,
// epilogue, session frames, the RPC header). No alignment assumed; the bytes are the same on
// every host. Through memcpy: one load or store on a little-endian host, where a loop over
// std::byte (which may alias anything, so the compiler keeps every intermediate in memory)
// cost ~10 instructions a byte on the per-message path.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace rmsg::wire {

template <class T>
constexpr T byteswap_if_big(T v) noexcept {
  static_assert(std::is_unsigned_v<T>);
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    return v;
  } else {
    T r = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      r = static_cast<T>((r << 8) | ((v >> (8 * i)) & 0xFF));
    }
    return r;
  }
}

template <class T>
T load_le(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return byteswap_if_big(v);
}

template <class T>
void store_le(std::byte* p, T v) noexcept {
  v = byteswap_if_big(v);
  std::memcpy(p, &v, sizeof v);
}

}  // namespace rmsg::wire
