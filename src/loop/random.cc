#include "rmsg/loop_time.h"

namespace rmsg {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) noexcept {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

Random::Random(std::uint64_t seed) noexcept : seed_(seed) {
  // splitmix64 spreads any seed (0 included) over the whole state: xoshiro must not start
  // from all zeros.
  std::uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

std::uint64_t Random::next() noexcept {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

std::uint64_t Random::below(std::uint64_t n) noexcept {
  if (n == 0) return 0;
  // Rejects the 2^64 mod n lowest draws, which would make low results likelier.
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    const std::uint64_t r = next();
    if (r >= threshold) return r % n;
  }
}

Duration Random::between(Duration lo, Duration hi) noexcept {
  if (hi <= lo) return lo;
  // Unsigned: hi - lo may not fit the signed rep.
  const auto span = static_cast<std::uint64_t>(hi.count()) - static_cast<std::uint64_t>(lo.count());
  const std::uint64_t off = span == ~0ull ? next() : below(span + 1);
  return Duration(static_cast<Duration::rep>(static_cast<std::uint64_t>(lo.count()) + off));
}

}  // namespace rmsg
