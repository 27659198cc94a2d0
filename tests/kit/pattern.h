// Test data for byte-exact transfers: byte i of a stream is pattern[i % kLength], where
// the pattern is random and its length a prime, so a lost, doubled or reordered chunk
// shows up unless it happens to be a multiple of ~1 MB long. Seed it from kit/seed.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace rmsg::testing {

// Log-uniform in [lo, hi]: small and large values equally likely per order of magnitude.
inline std::size_t log_uniform(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
  std::uniform_real_distribution<double> d(std::log2(double(lo)), std::log2(double(hi) + 1));
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::exp2(d(rng))), lo, hi);
}

class Pattern {
 public:
  static constexpr std::size_t kLength = 1'000'003;  // prime

  explicit Pattern(std::uint64_t seed) : bytes_(kLength) {
    std::mt19937_64 rng(seed);
    for (std::size_t i = 0; i < kLength; i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(&bytes_[i], &v, std::min<std::size_t>(8, kLength - i));
    }
  }

  // The longest contiguous piece of the stream at `offset`, at most `max` bytes.
  std::span<const std::byte> at(std::uint64_t offset, std::size_t max) const {
    const std::size_t start = offset % kLength;
    return {bytes_.data() + start, std::min(max, kLength - start)};
  }

  // True when `data` equals the stream's bytes at `offset`.
  bool matches(std::uint64_t offset, std::span<const std::byte> data) const {
    while (!data.empty()) {
      const auto expect = at(offset, data.size());
      if (std::memcmp(expect.data(), data.data(), expect.size()) != 0) return false;
      offset += expect.size();
      data = data.subspan(expect.size());
    }
    return true;
  }

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace rmsg::testing
