// Ring (msg/ring.h), OutQueue's FIFO: order and indexing across wrap-around and growth.
#include "session/ring.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <vector>

namespace rmsg::session {
namespace {

// Pushes and pops in a pattern that wraps the head many times and grows the array
// mid-wrap, checking every element against a std::deque doing the same.
TEST(RingTest, MatchesDequeAcrossWrapAndGrowth) {
  Ring<int> r;
  std::deque<int> d;
  int next = 0;
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 3 + round % 7; ++i) {
      r.push_back(next);
      d.push_back(next++);
    }
    for (int i = 0; i < 2 + round % 5 && !d.empty(); ++i) {
      ASSERT_EQ(r.front(), d.front());
      r.pop_front();
      d.pop_front();
    }
    ASSERT_EQ(r.size(), d.size());
    for (std::size_t i = 0; i < d.size(); ++i) ASSERT_EQ(r[i], d[i]) << round << " " << i;
    if (!d.empty()) {
      ASSERT_EQ(r.back(), d.back());
    }
  }
}

// pop_front resets the slot (an owned resource goes at once), and an emptied large ring
// gives its array back and is usable again.
TEST(RingTest, PopReleasesAndShrinkKeepsItUsable) {
  Ring<std::shared_ptr<int>> r;
  auto p = std::make_shared<int>(7);
  for (int i = 0; i < 1000; ++i) r.push_back(p);
  EXPECT_EQ(p.use_count(), 1001);
  while (!r.empty()) r.pop_front();
  EXPECT_EQ(p.use_count(), 1);
  r.shrink_if_empty();
  r.push_back(p);
  r.push_back(nullptr);
  ASSERT_EQ(r.size(), 2U);
  EXPECT_EQ(r.front(), p);
  EXPECT_EQ(r.back(), nullptr);
}

// emplace_back hands out a value-initialized slot however the slot was used before
// (popped, or new after growth), which OutQueue::push_reserved fills field by field.
TEST(RingTest, EmplaceBackGivesAFreshSlot) {
  struct Item {
    int a = 0;
    std::vector<int> v;
  };
  Ring<Item> r;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 1 + round % 20; ++i) {
      Item& it = r.emplace_back();
      ASSERT_EQ(it.a, 0);
      ASSERT_TRUE(it.v.empty());
      it.a = round + 1;
      it.v.assign(3, round);
    }
    ASSERT_EQ(r.back().a, round + 1);
    while (r.size() > static_cast<std::size_t>(round % 3)) r.pop_front();
  }
}

}  // namespace
}  // namespace rmsg::session
