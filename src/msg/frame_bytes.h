// Little-endian field access for the messenger's wire structures (banner, preamble,
// epilogue). Byte by byte: no alignment or host byte order assumed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rmsg::msg::wire {

template <class T>
T load_le(const std::byte* p) noexcept {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}

template <class T>
void store_le(std::byte* p, T v) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}

}  // namespace rmsg::msg::wire
