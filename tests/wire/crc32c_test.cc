// CRC-32C: the standard check values (RFC 3720 B.4, the "123456789" check), both
// implementations equal over random lengths, alignments and chunkings, and the run-time
// choice honouring RMSG_CRC32C.
#include "wire/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "kit/seed.h"

namespace rmsg::wire {
namespace {

std::span<const std::byte> bytes_of(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::vector<std::byte> filled(std::size_t n, auto f) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(f(i));
  return v;
}

using Fn = std::uint32_t (*)(std::span<const std::byte>, std::uint32_t) noexcept;

class Crc32cVectors : public ::testing::TestWithParam<Fn> {};

TEST_P(Crc32cVectors, StandardCheckValues) {
  const Fn crc = GetParam();
  EXPECT_EQ(crc(bytes_of("123456789"), 0), 0xE3069283u);
  EXPECT_EQ(crc({}, 0), 0u);
  // RFC 3720 B.4 (the RFC prints the CRC's bytes as sent, little-endian first).
  EXPECT_EQ(crc(filled(32, [](std::size_t) { return 0x00; }), 0), 0x8A9136AAu);
  EXPECT_EQ(crc(filled(32, [](std::size_t) { return 0xFF; }), 0), 0x62A8AB43u);
  EXPECT_EQ(crc(filled(32, [](std::size_t i) { return i; }), 0), 0x46DD794Eu);
  EXPECT_EQ(crc(filled(32, [](std::size_t i) { return 31 - i; }), 0), 0x113FDB5Cu);
}

TEST_P(Crc32cVectors, ContinuationComposes) {
  const Fn crc = GetParam();
  const auto a = bytes_of("1234");
  const auto b = bytes_of("56789");
  EXPECT_EQ(crc(b, crc(a, 0)), 0xE3069283u);
}

INSTANTIATE_TEST_SUITE_P(Impl, Crc32cVectors,
                         ::testing::Values(&crc32c, &crc32c_portable, &crc32c_hw),
                         [](const auto& param_info) {
                           return std::string(param_info.index == 0   ? "dispatched"
                                              : param_info.index == 1 ? "portable"
                                                                      : "hw");
                         });

TEST(Crc32c, HwAndPortableAgreeOverLengthsAlignmentsChunkings) {
  auto rng = testing::test_rng("crc32c");
  // Past 3 x 8192 bytes the hw path runs three interleaved chains (crc32c_sse42.cc), past
  // 3 x 256 short ones: lengths cover every regime and the boundaries around them.
  std::vector<std::byte> buf(100000 + 64);
  for (auto& b : buf) b = static_cast<std::byte>(rng());
  const std::size_t edges[] = {767, 768, 769, 1535, 1536, 24575, 24576, 24577, 49152, 49159};
  for (int round = 0; round < 2000; ++round) {
    const std::size_t off = rng() % 64;
    const std::size_t len = round < 200       ? static_cast<std::size_t>(round)
                            : round < 210     ? edges[round - 200]
                            : round % 40 == 0 ? rng() % 100000
                                              : rng() % 4096;
    const std::span<const std::byte> data(buf.data() + off, len);
    const std::uint32_t whole = crc32c_portable(data);
    ASSERT_EQ(crc32c_hw(data), whole) << "off " << off << " len " << len;
    ASSERT_EQ(crc32c(data), whole);
    // Any split into chunks gives the same CRC, each implementation continuing the other's.
    std::uint32_t c = 0;
    std::size_t at = 0;
    for (bool hw = false; at < len; hw = !hw) {
      const std::size_t n = std::min<std::size_t>(len - at, 1 + rng() % 97);
      c = hw ? crc32c_hw(data.subspan(at, n), c) : crc32c_portable(data.subspan(at, n), c);
      at += n;
    }
    ASSERT_EQ(c, whole) << "off " << off << " len " << len;
  }
}

// crc32c_each gives each part's own CRC (from 0), whatever the parts' lengths (empty ones,
// short ones with 4/2/1-byte tails, long ones past the three-chain threshold) and count.
TEST(Crc32c, EachPartAsAlone) {
  auto rng = testing::test_rng("crc32c_each");
  std::vector<std::byte> buf(20000);
  for (auto& b : buf) b = static_cast<std::byte>(rng());
  for (int round = 0; round < 500; ++round) {
    std::span<const std::byte> parts[4];
    const std::size_t n = rng() % 5;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t len = round % 10 == 0 ? rng() % 10000 : rng() % 100;
      parts[i] = std::span<const std::byte>(buf).subspan(rng() % 10000, len);
    }
    std::uint32_t out[4] = {1, 1, 1, 1};
    crc32c_each(std::span(parts, n), out);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], crc32c_portable(parts[i])) << "part " << i << " of " << n;
    }
    for (std::size_t i = n; i < 4; ++i) ASSERT_EQ(out[i], 1u);  // nothing past the parts
  }
}

TEST(Crc32c, ChoiceFollowsCpuAndEnvironment) {
  const char* env = std::getenv("RMSG_CRC32C");
  const bool forced = env != nullptr && std::string_view(env) == "portable";
  const auto expect = crc32c_hw_available() && !forced ? Crc32cImpl::sse42 : Crc32cImpl::portable;
  EXPECT_EQ(crc32c_impl(), expect) << crc32c_impl_name(crc32c_impl());
#if defined(__x86_64__)
  EXPECT_EQ(crc32c_hw_available(), __builtin_cpu_supports("sse4.2") != 0);
#endif
}

}  // namespace
}  // namespace rmsg::wire
