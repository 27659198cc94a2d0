#include "rmsg/counters.h"

#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <thread>
#include <vector>

namespace rmsg {
namespace {

TEST(Counters, CreateOnUseAndDumpSorted) {
  CounterSet set;
  set.counter("b.bytes").add(10);
  set.counter("a.msgs").add();
  set.counter("b.bytes").add(5);
  EXPECT_EQ(set.value("b.bytes"), 15u);
  EXPECT_EQ(set.value("missing"), 0u);
  std::ostringstream out;
  set.dump(out, "s1.");
  EXPECT_EQ(out.str(), "s1.a.msgs 1\ns1.b.bytes 15\n");
}

TEST(Counters, ReferencesStayValidAndAddsAreAtomic) {
  CounterSet set;
  Counter& first = set.counter("first");
  for (int i = 0; i < 1000; ++i) set.counter(std::to_string(i));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) first.add();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(set.value("first"), 40000u);
}

TEST(Histogram, PowerOfTwoBuckets) {
  EXPECT_EQ(Histogram::bucket_of(0), 0);
  EXPECT_EQ(Histogram::bucket_of(1), 1);
  EXPECT_EQ(Histogram::bucket_of(2), 2);
  EXPECT_EQ(Histogram::bucket_of(3), 2);
  EXPECT_EQ(Histogram::bucket_of(1023), 10);
  EXPECT_EQ(Histogram::bucket_of(1024), 11);
  EXPECT_EQ(Histogram::bucket_of(~0ull), Histogram::kBuckets - 1);
  EXPECT_EQ(Histogram::upper_bound(0), 1u);
  EXPECT_EQ(Histogram::upper_bound(10), 1024u);
  EXPECT_EQ(Histogram::upper_bound(Histogram::kBuckets - 1), 0u);  // open
  for (int i = 1; i + 1 < Histogram::kBuckets; ++i) {
    EXPECT_EQ(Histogram::bucket_of(Histogram::upper_bound(i) - 1), i);
    EXPECT_EQ(Histogram::bucket_of(Histogram::upper_bound(i)), i + 1);
  }
}

TEST(Histogram, RecordsCountAndSum) {
  Histogram h;
  for (std::uint64_t v : {0ull, 5ull, 6ull, 1000ull, 1ull << 50}) h.record(v);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_EQ(h.sum(), 1011u + (1ull << 50));
  EXPECT_EQ(h.bucket(0), 1u);
  EXPECT_EQ(h.bucket(3), 2u);
  EXPECT_EQ(h.bucket(10), 1u);
  EXPECT_EQ(h.bucket(Histogram::kBuckets - 1), 1u);
}

TEST(Histogram, DumpsBesideTheCounters) {
  CounterSet set;
  set.counter("a").add(2);
  set.histogram("h_ns").record(0);
  set.histogram("h_ns").record(700);
  set.histogram("h_ns").record(~0ull >> 1);
  EXPECT_EQ(set.find_histogram("missing"), nullptr);
  ASSERT_NE(set.find_histogram("h_ns"), nullptr);
  EXPECT_EQ(set.find_histogram("h_ns")->count(), 3u);
  EXPECT_EQ(set.value("h_ns"), 0u);  // not a counter
  std::ostringstream out;
  set.dump(out);
  EXPECT_EQ(out.str(),
            "a 2\nh_ns.count 3\nh_ns.ge_70368744177664 1\nh_ns.lt_1 1\nh_ns.lt_1024 1\n"
            "h_ns.sum " +
                std::to_string(700 + (~0ull >> 1)) + "\n");
}

TEST(Counters, AddOwnedIsAPlainIncrement) {
  Counter c;
  c.add_owned();
  c.add_owned(4);
  EXPECT_EQ(c.value(), 5u);
}

// The loop thread counts with add_owned() while other threads count the same event with
// add() (a messenger's refused sends): not one increment may be lost.
TEST(Counters, AddOwnedBesideForeignAddsLosesNothing) {
  constexpr std::uint64_t kForeign = 2000000;
  Counter c;
  std::atomic<bool> started{false};
  std::atomic<bool> done{false};
  std::thread foreign([&] {
    while (!started.load()) {
    }
    for (std::uint64_t i = 0; i < kForeign; ++i) c.add();
    done.store(true);
  });
  // The owner counts for as long as the foreign thread does.
  std::uint64_t owned = 0;
  started.store(true);
  while (!done.load()) {
    c.add_owned();
    ++owned;
  }
  foreign.join();
  EXPECT_EQ(c.value(), owned + kForeign);
  c.set(7);
  EXPECT_EQ(c.value(), 7u);
}

}  // namespace
}  // namespace rmsg
