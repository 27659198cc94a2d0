// DeadlineQueue: one timer's worth of call deadlines, stale entries skipped and bounded.
#include "msg/rpc_deadlines.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>

namespace rmsg::msg {
namespace {

using std::chrono::milliseconds;

struct Calls {
  std::map<std::uint64_t, Clock::time_point> live;
  void add(DeadlineQueue& q, std::uint64_t id, Clock::time_point d) {
    live[id] = d;
    q.push({d, id}, live.size(), [this](auto put) {
      for (const auto& [i, t] : live) put({t, i});
    });
  }
};

TEST(DeadlineQueue, PopsDueEntriesEarliestFirst) {
  DeadlineQueue q;
  Calls c;
  const Clock::time_point t0{};
  c.add(q, 1, t0 + milliseconds(30));
  c.add(q, 2, t0 + milliseconds(10));
  c.add(q, 3, t0 + milliseconds(20));
  EXPECT_EQ(q.next(), t0 + milliseconds(10));
  const auto due = q.pop_due(t0 + milliseconds(20));
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].id, 2u);
  EXPECT_EQ(due[1].id, 3u);
  EXPECT_EQ(q.next(), t0 + milliseconds(30));
  EXPECT_TRUE(q.pop_due(t0 + milliseconds(29)).empty());
}

TEST(DeadlineQueue, StaleEntriesOfCompletedCallsStayBounded) {
  // A million calls, each completed before the next starts (one outstanding), all with
  // the same long budget: the queue rebuilds from the live calls instead of growing.
  DeadlineQueue q;
  Calls c;
  std::size_t most = 0;
  for (std::uint64_t id = 1; id <= 1'000'000; ++id) {
    c.add(q, id, Clock::time_point{} + milliseconds(30'000) + std::chrono::microseconds(id));
    most = std::max(most, q.size());
    c.live.erase(id);
  }
  EXPECT_LE(most, 2 * 1 + 64u);
  // What is left is stale: a caller finds none of it live.
  for (const auto& e : q.pop_due(Clock::time_point::max())) EXPECT_FALSE(c.live.contains(e.id));
}

TEST(DeadlineQueue, RebuildKeepsEveryLiveDeadline) {
  DeadlineQueue q;
  Calls c;
  for (std::uint64_t id = 1; id <= 500; ++id) {
    c.add(q, id, Clock::time_point{} + milliseconds(1000 - static_cast<int>(id)));
    if (id % 3 != 0) c.live.erase(id);  // two of three complete
  }
  std::map<std::uint64_t, Clock::time_point> seen;
  for (const auto& e : q.pop_due(Clock::time_point::max())) {
    if (c.live.contains(e.id) && c.live[e.id] == e.deadline) seen[e.id] = e.deadline;
  }
  EXPECT_EQ(seen, c.live);
}

}  // namespace
}  // namespace rmsg::msg
