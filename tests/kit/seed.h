// The one seed of every random test: RMSG_TEST_SEED (decimal or 0x-hex) when set, else a
// fresh one per process. rmsg_test_main prints `RMSG_TEST_SEED=<n>` before the first test
// and, after a failed test, the command line that reruns it with the same seed.
//
// Each use derives its own seed from that one, the running test's full name and `what`,
// so a test draws the same numbers whether it runs alone (--gtest_filter) or among others,
// in any order, and two uses in one test do not share a sequence.
//
// Threading: any thread; test_seed() is fixed on first use.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>

namespace rmsg::testing {

// The process's seed (RMSG_TEST_SEED or fresh); the same value on every call.
std::uint64_t test_seed();
// A seed for one random source of the running test (or of the process outside a test).
std::uint64_t seed_for(std::string_view what);
// A generator seeded with seed_for(what).
inline std::mt19937_64 test_rng(std::string_view what) {
  return std::mt19937_64(seed_for(what));
}
// Prints `RMSG_TEST_SEED=<n>` (once per process; rmsg_test_main calls it at start).
void print_test_seed();

}  // namespace rmsg::testing
