#include "kit/seed.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace rmsg::testing {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t mix(std::uint64_t h, std::string_view s) {
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;  // FNV-1a
  return splitmix64(h);
}

std::uint64_t read_seed() {
  if (const char* env = std::getenv("RMSG_TEST_SEED"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const std::uint64_t v = std::strtoull(env, &end, 0);
    if (end != nullptr && *end == '\0') return v;
    std::fprintf(stderr, "RMSG_TEST_SEED=%s is not a number; using a fresh seed\n", env);
  }
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) | rd();
}

}  // namespace

std::uint64_t test_seed() {
  static const std::uint64_t seed = read_seed();
  return seed;
}

std::uint64_t seed_for(std::string_view what) {
  std::uint64_t h = splitmix64(test_seed());
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    h = mix(h, info->test_suite_name());
    h = mix(h, ".");
    h = mix(h, info->name());
  }
  return mix(h, what);
}

void print_test_seed() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::printf("RMSG_TEST_SEED=%llu\n", static_cast<unsigned long long>(test_seed()));
    std::fflush(stdout);
  });
}

}  // namespace rmsg::testing
