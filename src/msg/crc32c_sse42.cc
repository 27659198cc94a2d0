// CRC-32C with SSE4.2's crc32 instruction. Only the function below is compiled for SSE4.2
// (target attribute), not the file set, so the library still loads on a CPU without it;
// crc32c.cc calls it only after __builtin_cpu_supports("sse4.2") said yes.
//
// One crc32q retires 8 bytes with a 3-cycle latency, so a single dependency chain runs at
// about 8 bytes / 3 cycles. Three interleaved chains would triple that but need a carry-less
// multiply (PCLMULQDQ) or shift tables to merge; the Soft-RoCE guest's Nehalem lacks PCLMUL
// and frames are mostly small, so one chain it is (docs/perf.md has the numbers).
#include <cstring>

#include "msg/crc32c_hw.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace rmsg::msg::detail {

#if defined(__x86_64__)

bool crc32c_hw_supported() noexcept {
  static const bool has = __builtin_cpu_supports("sse4.2") != 0;
  return has;
}

__attribute__((target("sse4.2"))) std::uint32_t crc32c_update_hw(std::uint32_t reg,
                                                                 const std::byte* p,
                                                                 std::size_t n) noexcept {
  std::uint64_t r = reg;
  for (; n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7u) != 0; --n, ++p) {
    r = _mm_crc32_u8(static_cast<std::uint32_t>(r), static_cast<std::uint8_t>(*p));
  }
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, sizeof word);
    r = _mm_crc32_u64(r, word);
  }
  for (; n > 0; --n, ++p) {
    r = _mm_crc32_u8(static_cast<std::uint32_t>(r), static_cast<std::uint8_t>(*p));
  }
  return static_cast<std::uint32_t>(r);
}

#else

bool crc32c_hw_supported() noexcept {
  return false;
}

std::uint32_t crc32c_update_hw(std::uint32_t reg, const std::byte*, std::size_t) noexcept {
  return reg;  // never called: crc32c_hw_supported() is false
}

#endif

}  // namespace rmsg::msg::detail
