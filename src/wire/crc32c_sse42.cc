// CRC-32C with SSE4.2's crc32 instruction. Only the functions below are compiled for SSE4.2
// (target attribute), not the file set, so the library still loads on a CPU without it;
// crc32c.cc calls them only after __builtin_cpu_supports("sse4.2") said yes.
//
// One crc32q retires 8 bytes but has a 3-cycle latency, so one dependency chain runs at a
// third of the instruction's throughput. Long buffers are therefore cut into three equal
// blocks, CRC'd as three interleaved chains, and merged: the register is linear over
// GF(2), so reg(A ++ B) = shift(reg(A), |B|) ^ reg0(B), where shift() feeds |B| zero bytes.
// Without PCLMULQDQ (the Soft-RoCE guest's Nehalem has none) shift() is four lookups in a
// table per block length (Mark Adler's crc32c.c does the same), built once at first use.
#include <array>
#include <cstring>

#include "wire/crc32c_hw.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace rmsg::wire::detail {

#if defined(__x86_64__)

namespace {

constexpr std::uint32_t kPolyReflected = 0x82F63B78;
constexpr std::size_t kShort = 256;  // bytes per chain, short blocks
constexpr std::size_t kLong = 8192;  // bytes per chain, long blocks

using ShiftTable = std::array<std::array<std::uint32_t, 256>, 4>;

std::uint32_t apply(const ShiftTable& t, std::uint32_t r) noexcept {
  return t[0][r & 0xFF] ^ t[1][(r >> 8) & 0xFF] ^ t[2][(r >> 16) & 0xFF] ^ t[3][r >> 24];
}

// The table of shift(., bytes) from the images of the 32 basis vectors.
ShiftTable table_from_basis(const std::array<std::uint32_t, 32>& basis) noexcept {
  ShiftTable t{};
  for (std::size_t k = 0; k < 4; ++k) {
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::uint32_t v = 0;
      for (std::size_t bit = 0; bit < 8; ++bit) {
        if ((b >> bit & 1u) != 0) v ^= basis[8 * k + bit];
      }
      t[k][b] = v;
    }
  }
  return t;
}

struct Shifts {
  ShiftTable short_block;
  ShiftTable long_block;
};

Shifts make_shifts() noexcept {
  std::array<std::uint32_t, 32> basis{};
  for (std::size_t i = 0; i < 32; ++i) {
    std::uint32_t r = 1u << i;
    for (std::size_t bit = 0; bit < 8 * kShort; ++bit) {
      r = (r >> 1) ^ ((r & 1u) != 0 ? kPolyReflected : 0u);
    }
    basis[i] = r;
  }
  Shifts s{};
  s.short_block = table_from_basis(basis);
  for (auto& v : basis) {
    for (std::size_t n = kShort; n < kLong; n += kShort) v = apply(s.short_block, v);
  }
  s.long_block = table_from_basis(basis);
  return s;
}

const Shifts& shifts() noexcept {
  static const Shifts s = make_shifts();
  return s;
}

std::uint64_t load64(const std::byte* p) noexcept {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

// Three chains over [p, p + 3 * block) merged into r (p 8-byte aligned: the caller aligns it).
__attribute__((target("sse4.2"))) std::uint64_t three_way(std::uint64_t r, const std::byte* p,
                                                          std::size_t block,
                                                          const ShiftTable& shift) noexcept {
  std::uint64_t r1 = 0;
  std::uint64_t r2 = 0;
  for (const std::byte* end = p + block; p < end; p += 8) {
    r = _mm_crc32_u64(r, load64(p));
    r1 = _mm_crc32_u64(r1, load64(p + block));
    r2 = _mm_crc32_u64(r2, load64(p + 2 * block));
  }
  r = apply(shift, static_cast<std::uint32_t>(r)) ^ static_cast<std::uint32_t>(r1);
  return apply(shift, static_cast<std::uint32_t>(r)) ^ static_cast<std::uint32_t>(r2);
}

}  // namespace

bool crc32c_hw_supported() noexcept {
  static const bool has = __builtin_cpu_supports("sse4.2") != 0;
  return has;
}

namespace {

// The long part of a buffer (n >= 3 * kShort): aligned, then three chains per block. Out of
// line, so that the short path (the per-message headers and small bodies, most calls) saves
// and restores no registers for it.
struct Rest {
  std::uint64_t r;
  const std::byte* p;
  std::size_t n;  // < 3 * kShort bytes left at p
};
__attribute__((target("sse4.2"), noinline)) Rest long_part(std::uint64_t r, const std::byte* p,
                                                           std::size_t n) noexcept {
  for (; (reinterpret_cast<std::uintptr_t>(p) & 7u) != 0; --n, ++p) {
    r = _mm_crc32_u8(static_cast<std::uint32_t>(r), static_cast<std::uint8_t>(*p));
  }
  const Shifts& s = shifts();
  for (; n >= 3 * kLong; n -= 3 * kLong, p += 3 * kLong) r = three_way(r, p, kLong, s.long_block);
  for (; n >= 3 * kShort; n -= 3 * kShort, p += 3 * kShort) {
    r = three_way(r, p, kShort, s.short_block);
  }
  return {r, p, n};
}

}  // namespace

namespace {

__attribute__((target("sse4.2"), always_inline)) inline std::uint32_t update(
    std::uint32_t reg, const std::byte* p, std::size_t n) noexcept {
  std::uint64_t r = reg;
  // Short buffers load unaligned (x86-64 allows it, at no cost within a cache line) rather
  // than take up to 7 byte steps before and after.
  if (n >= 3 * kShort) {
    const Rest rest = long_part(r, p, n);
    r = rest.r;
    p = rest.p;
    n = rest.n;
  }
  // Four words a step: the chain's latency bounds the speed either way, but a step costs
  // a compare, a branch and two adds less per word (most calls are 24-88 bytes).
  for (; n >= 32; n -= 32, p += 32) {
    r = _mm_crc32_u64(r, load64(p));
    r = _mm_crc32_u64(r, load64(p + 8));
    r = _mm_crc32_u64(r, load64(p + 16));
    r = _mm_crc32_u64(r, load64(p + 24));
  }
  for (; n >= 8; n -= 8, p += 8) r = _mm_crc32_u64(r, load64(p));
  auto r32 = static_cast<std::uint32_t>(r);
  if (n >= 4) {
    std::uint32_t w;
    std::memcpy(&w, p, sizeof w);
    r32 = _mm_crc32_u32(r32, w);
    n -= 4;
    p += 4;
  }
  if (n >= 2) {
    std::uint16_t w;
    std::memcpy(&w, p, sizeof w);
    r32 = _mm_crc32_u16(r32, w);
    n -= 2;
    p += 2;
  }
  if (n > 0) r32 = _mm_crc32_u8(r32, static_cast<std::uint8_t>(*p));
  return r32;
}

}  // namespace

__attribute__((target("sse4.2"))) std::uint32_t crc32c_update_hw(std::uint32_t reg,
                                                                 const std::byte* p,
                                                                 std::size_t n) noexcept {
  return update(reg, p, n);
}

__attribute__((target("sse4.2"))) void crc32c_each_hw(const std::span<const std::byte>* parts,
                                                      std::size_t n, std::uint32_t* out) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = ~update(~0u, parts[i].data(), parts[i].size());
}

#else

bool crc32c_hw_supported() noexcept {
  return false;
}

std::uint32_t crc32c_update_hw(std::uint32_t reg, const std::byte*, std::size_t) noexcept {
  return reg;  // never called: crc32c_hw_supported() is false
}

void crc32c_each_hw(const std::span<const std::byte>*, std::size_t, std::uint32_t*) noexcept {}

#endif

}  // namespace rmsg::wire::detail
