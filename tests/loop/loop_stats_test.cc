// The loop's iteration-time instruments: loop.iteration_max_ns (the longest iteration) and
// the quantile bound read from loop.iteration_ns's power-of-two buckets (loop_stats.h).
#include <gtest/gtest.h>
#include <time.h>

#include "loop/loop_stats.h"
#include "rmsg/event_loop.h"

namespace rmsg::loop {
namespace {

using namespace std::chrono_literals;
using Buckets = std::array<std::uint64_t, Histogram::kBuckets>;

TEST(LoopStatsQuantile, IsTheUpperBoundOfTheBucketHoldingTheQuantile) {
  Buckets b{};
  EXPECT_EQ(quantile_bound(b, 0.99), 0u);  // nothing recorded
  b[10] = 98;                              // [512, 1024)
  b[20] = 2;                               // [2^19, 2^20)
  EXPECT_EQ(quantile_bound(b, 0.5), 1024u);
  EXPECT_EQ(quantile_bound(b, 0.98), 1024u);
  EXPECT_EQ(quantile_bound(b, 0.99), 1u << 20);
  EXPECT_EQ(quantile_bound(b, 1.0), 1u << 20);
  b[0] = 1000;  // zeros: bound 1
  EXPECT_EQ(quantile_bound(b, 0.5), 1u);
}

TEST(LoopStatsQuantile, ASnapshotDifferenceIsOnePhase) {
  Histogram h;
  for (int i = 0; i < 100; ++i) h.record(100);
  const Buckets before = snapshot(h);
  h.record(1'000'000);
  Buckets phase = snapshot(h);
  for (std::size_t i = 0; i < phase.size(); ++i) phase[i] -= before[i];
  EXPECT_EQ(quantile_bound(phase, 0.5), 1u << 20);  // only the phase's one value
  EXPECT_EQ(quantile_bound(snapshot(h), 0.5), 128u);
}

TEST(LoopStatsMax, TheLongestIterationIsKeptAsAGauge) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  const auto spin = [](std::chrono::nanoseconds d) {
    timespec t0, t;
    ::clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
      ::clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1'000'000'000 + (t.tv_nsec - t0.tv_nsec) < d.count());
  };
  int ran = 0;
  (*loop)->post([&] {
    spin(3ms);
    ++ran;
  });
  ASSERT_TRUE((*loop)->run_for([&] { return ran == 1; }, 5s));
  const auto max1 = (*loop)->counters().value("loop.iteration_max_ns");
  EXPECT_GE(max1, 3'000'000u);
  (*loop)->post([&] { ++ran; });  // a short one does not lower it
  ASSERT_TRUE((*loop)->run_for([&] { return ran == 2; }, 5s));
  EXPECT_EQ((*loop)->counters().value("loop.iteration_max_ns"), max1);
  const Histogram* h = (*loop)->counters().find_histogram("loop.iteration_ns");
  ASSERT_NE(h, nullptr);
  EXPECT_GE(quantile_bound(snapshot(*h), 1.0), max1);
}

}  // namespace
}  // namespace rmsg::loop
