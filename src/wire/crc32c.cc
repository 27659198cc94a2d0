// CRC-32C: the portable slicing-by-8 and the run-time choice (crc32c.h).
#include "wire/crc32c.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "wire/crc32c_hw.h"

namespace rmsg::wire {
namespace {

constexpr std::uint32_t kPolyReflected = 0x82F63B78;

// tables[k][b]: the register after byte b followed by k zero bytes (slicing-by-8).
constexpr std::array<std::array<std::uint32_t, 256>, 8> make_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t r = b;
    for (int i = 0; i < 8; ++i) r = (r >> 1) ^ ((r & 1u) != 0 ? kPolyReflected : 0u);
    t[0][b] = r;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}
constexpr auto kTables = make_tables();

std::uint32_t load_le32(const std::byte* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

std::uint32_t update_portable(std::uint32_t r, const std::byte* p, std::size_t n) noexcept {
  const auto& t = kTables;
  for (; n >= 8; n -= 8, p += 8) {
    const std::uint32_t lo = load_le32(p) ^ r;
    const std::uint32_t hi = load_le32(p + 4);
    r = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) r = (r >> 8) ^ t[0][(r ^ static_cast<std::uint32_t>(*p)) & 0xFF];
  return r;
}

using UpdateFn = std::uint32_t (*)(std::uint32_t, const std::byte*, std::size_t) noexcept;

bool portable_forced() noexcept {
  const char* v = std::getenv("RMSG_CRC32C");  // NOLINT(concurrency-mt-unsafe): read once
  return v != nullptr && std::string_view(v) == "portable";
}

using EachFn = void (*)(const std::span<const std::byte>*, std::size_t, std::uint32_t*) noexcept;

void each_portable(const std::span<const std::byte>* parts, std::size_t n,
                   std::uint32_t* out) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = ~update_portable(~0u, parts[i].data(), parts[i].size());
}

struct Choice {
  Crc32cImpl impl;
  UpdateFn update;
  EachFn each;
};

Choice choose() noexcept {
  if (!portable_forced() && detail::crc32c_hw_supported()) {
    return {Crc32cImpl::sse42, &detail::crc32c_update_hw, &detail::crc32c_each_hw};
  }
  return {Crc32cImpl::portable, &update_portable, &each_portable};
}

const Choice& choice() noexcept {
  static const Choice c = choose();
  return c;
}

// The update crc32c() calls: first update_first, which makes the choice and stores it, so
// each later call is one relaxed load and an indirect call, without choice()'s guard check
// and the registers its slow path saves (12 calls per RPC round trip, most of 28-88 bytes).
// Constant-initialized: usable from any static initializer; threads that race on the first
// call store the same function.
std::uint32_t update_first(std::uint32_t r, const std::byte* p, std::size_t n) noexcept;
std::atomic<UpdateFn> g_update{&update_first};

std::uint32_t update_first(std::uint32_t r, const std::byte* p, std::size_t n) noexcept {
  const UpdateFn f = choice().update;
  g_update.store(f, std::memory_order_relaxed);
  return f(r, p, n);
}

// The same for crc32c_each().
void each_first(const std::span<const std::byte>* parts, std::size_t n,
                std::uint32_t* out) noexcept;
std::atomic<EachFn> g_each{&each_first};

void each_first(const std::span<const std::byte>* parts, std::size_t n,
                std::uint32_t* out) noexcept {
  const EachFn f = choice().each;
  g_each.store(f, std::memory_order_relaxed);
  f(parts, n, out);
}

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc) noexcept {
  return ~g_update.load(std::memory_order_relaxed)(~crc, data.data(), data.size());
}

void crc32c_each(std::span<const std::span<const std::byte>> parts, std::uint32_t* out) noexcept {
  g_each.load(std::memory_order_relaxed)(parts.data(), parts.size(), out);
}

std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc) noexcept {
  return ~update_portable(~crc, data.data(), data.size());
}

std::uint32_t crc32c_hw(std::span<const std::byte> data, std::uint32_t crc) noexcept {
  if (!detail::crc32c_hw_supported()) return crc32c_portable(data, crc);
  return ~detail::crc32c_update_hw(~crc, data.data(), data.size());
}

bool crc32c_hw_available() noexcept {
  return detail::crc32c_hw_supported();
}

Crc32cImpl crc32c_impl() noexcept {
  return choice().impl;
}

const char* crc32c_impl_name(Crc32cImpl impl) noexcept {
  return impl == Crc32cImpl::sse42 ? "sse4.2" : "portable";
}

}  // namespace rmsg::wire
