// DeadlineQueue: one timer's worth of call deadlines, stale entries skipped and bounded.
// The budget conversions saturate (no signed overflow: this runs under UBSan too).
#include "rpc/rpc_deadlines.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <map>

namespace rmsg::rpc {
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

TEST(RpcBudget, NoDeadlineTravelsAsNoBudget) {
  const Clock::time_point now = Clock::time_point{} + std::chrono::hours(1);
  EXPECT_EQ(budget_for(Clock::time_point::max(), now), kNoBudget);
  EXPECT_EQ(budget_for(now + std::chrono::nanoseconds(1), now), 1u);  // rounded up
  EXPECT_EQ(budget_for(now + milliseconds(5), now), 5000u);
  // A difference the clock cannot hold (a negative `now`, as a manual clock may give).
  EXPECT_EQ(budget_for(Clock::time_point::max() - std::chrono::nanoseconds(1),
                       Clock::time_point::min() + std::chrono::hours(1)),
            kNoBudget);
}

TEST(RpcBudget, HostileBudgetsSaturateToNoDeadline) {
  const Clock::time_point max = Clock::time_point::max();
  for (const Clock::time_point rx :
       {Clock::time_point{}, Clock::time_point{} + std::chrono::hours(1),
        Clock::time_point{} + std::chrono::hours(24 * 365 * 100), max - milliseconds(1),
        Clock::time_point::min() + milliseconds(1)}) {
    EXPECT_EQ(deadline_for(rx, kNoBudget), max);
    for (const std::uint64_t b :
         {kNoBudget - 1, std::uint64_t{1} << 63, (std::uint64_t{1} << 63) - 1,
          std::uint64_t{9'223'372'036'854'775}, std::uint64_t{9'223'372'036'854'776},
          std::uint64_t{1} << 62}) {
      EXPECT_EQ(deadline_for(rx, b), max) << b;
    }
  }
  // What a caller with deadline max() - 1 ns sends reads back as no deadline, at any
  // receiver whose clock is ahead of the caller's.
  const Clock::time_point caller = Clock::time_point{} + std::chrono::seconds(5);
  const std::uint64_t b = budget_for(max - std::chrono::nanoseconds(1), caller);
  EXPECT_EQ(deadline_for(caller + std::chrono::hours(1), b), max);
  // Ordinary budgets are exact.
  const Clock::time_point rx = Clock::time_point{} + std::chrono::hours(1);
  EXPECT_EQ(deadline_for(rx, 1500), rx + std::chrono::microseconds(1500));
  EXPECT_EQ(deadline_for(rx, 0), rx);
}

}  // namespace
}  // namespace rmsg::rpc
