// copy_bytes: memcpy for a data path's copies, which are mostly short messages. Up to 64
// bytes it copies with fixed-size moves that the compiler inlines (overlapping ones from
// both ends, so any length is a few moves): a call into libc's memcpy and its return cost
// as much as ~20 instructions under an emulator (qemu TCG, the Soft-RoCE guest), where a
// 64-byte message's copy is a handful of instructions. Longer copies go to memcpy.
// The ranges must not overlap.
#pragma once

#include <cstddef>
#include <cstring>

namespace rmsg {

inline void copy_bytes(std::byte* dst, const std::byte* src, std::size_t n) noexcept {
  if (n > 64) {
    std::memcpy(dst, src, n);
  } else if (n >= 16) {  // [0, 16) and [n - 16, n); above 32 also [16, 32) and [n - 32, n - 16)
    std::memcpy(dst, src, 16);
    std::memcpy(dst + n - 16, src + n - 16, 16);
    if (n > 32) {
      std::memcpy(dst + 16, src + 16, 16);
      std::memcpy(dst + n - 32, src + n - 32, 16);
    }
  } else if (n >= 8) {
    std::memcpy(dst, src, 8);
    std::memcpy(dst + n - 8, src + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, src, 4);
    std::memcpy(dst + n - 4, src + n - 4, 4);
  } else if (n > 0) {  // 1-3 bytes: the first, the middle and the last
    dst[0] = src[0];
    dst[n / 2] = src[n / 2];
    dst[n - 1] = src[n - 1];
  }
}

}  // namespace rmsg
