#include "cm/idle_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

namespace rmsg::cm {
namespace {

using namespace std::chrono_literals;
using Pool = IdlePool<std::string, std::unique_ptr<int>>;

std::unique_ptr<int> item(int v) {
  return std::make_unique<int>(v);
}

TEST(IdlePool, TakesOnlyMatchingKeysMostRecentFirst) {
  Pool pool(8, 10s);
  const auto t0 = Clock::now();
  EXPECT_TRUE(pool.put("a", item(1), t0).empty());
  EXPECT_TRUE(pool.put("b", item(2), t0).empty());
  EXPECT_TRUE(pool.put("a", item(3), t0).empty());
  EXPECT_EQ(pool.count("a"), 2u);
  EXPECT_FALSE(pool.take("c").has_value());
  EXPECT_EQ(**pool.take("a"), 3);
  EXPECT_EQ(**pool.take("a"), 1);
  EXPECT_FALSE(pool.take("a").has_value());
  EXPECT_EQ(pool.size(), 1u);
}

TEST(IdlePool, EvictsTheOldestWhenFull) {
  Pool pool(2, 10s);
  const auto t0 = Clock::now();
  EXPECT_TRUE(pool.put("a", item(1), t0).empty());
  EXPECT_TRUE(pool.put("b", item(2), t0 + 1ms).empty());
  auto evicted = pool.put("a", item(3), t0 + 2ms);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(*evicted[0], 1);
  EXPECT_EQ(pool.count("a"), 1u);
  EXPECT_EQ(**pool.take("a"), 3);
}

TEST(IdlePool, ExpiresByIdleTime) {
  Pool pool(8, 100ms);
  const auto t0 = Clock::now();
  EXPECT_TRUE(pool.put("a", item(1), t0).empty());
  EXPECT_TRUE(pool.put("b", item(2), t0 + 50ms).empty());
  EXPECT_TRUE(pool.expire(t0 + 100ms).empty());
  auto gone = pool.expire(t0 + 120ms);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(*gone[0], 1);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool.clear().size(), 1u);
  EXPECT_EQ(pool.size(), 0u);
}

TEST(IdlePool, TakeIfRemovesOnlyMatchesAcrossKeysAndKeepsTheRestUsable) {
  Pool pool(8, 10s);
  const auto t0 = Clock::now();
  for (int v = 1; v <= 6; ++v) pool.put(v % 2 ? "a" : "b", item(v), t0 + v * 1ms);
  auto odd_or_four = pool.take_if([](const std::unique_ptr<int>& p) { return *p % 2 || *p == 4; });
  ASSERT_EQ(odd_or_four.size(), 4u);
  EXPECT_EQ(*odd_or_four[0], 1);  // oldest first
  EXPECT_EQ(*odd_or_four[3], 5);
  EXPECT_EQ(pool.size(), 2u);
  EXPECT_EQ(pool.count("a"), 0u);
  EXPECT_EQ(pool.count("b"), 2u);
  EXPECT_EQ(**pool.take("b"), 6);
  EXPECT_EQ(pool.clear().size(), 1u);
  EXPECT_TRUE(pool.take_if([](const std::unique_ptr<int>&) { return true; }).empty());
}

TEST(IdlePool, ZeroCapacityKeepsNothing) {
  Pool pool(0, 10s);
  auto back = pool.put("a", item(1), Clock::now());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(pool.size(), 0u);
}

}  // namespace
}  // namespace rmsg::cm
