#include <chrono>
#include <vector>

#include "kit/loop_fixture.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
using testing::LoopTest;

TEST_F(LoopTest, TimersFireInDeadlineOrder) {
  std::vector<int> order;
  loop().add_timer(30ms, [&] { order.push_back(3); });
  loop().add_timer(10ms, [&] { order.push_back(1); });
  loop().add_timer(20ms, [&] { order.push_back(2); });
  EXPECT_TRUE(loop().run_for([&] { return order.size() == 3; }, 5s));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST_F(LoopTest, EqualDeadlinesFireInInsertionOrder) {
  std::vector<int> order;
  // Zero delay: every timer gets a deadline of "now" at insertion; a later insertion can
  // only have an equal or later deadline, and equal ones keep insertion order.
  for (int i = 0; i < 50; ++i) loop().add_timer(0ms, [&order, i] { order.push_back(i); });
  EXPECT_TRUE(loop().run_for([&] { return order.size() == 50; }, 5s));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(LoopTest, FiresNoEarlierThanItsDelay) {
  const auto start = Clock::now();
  Clock::time_point fired;
  loop().add_timer(15ms, [&] { fired = Clock::now(); });
  EXPECT_TRUE(loop().run_for([&] { return fired != Clock::time_point{}; }, 5s));
  EXPECT_GE(fired - start, 15ms);
}

TEST_F(LoopTest, CancelBeforeFiring) {
  bool fired = false, other = false;
  const TimerId id = loop().add_timer(5ms, [&] { fired = true; });
  loop().add_timer(20ms, [&] { other = true; });
  EXPECT_TRUE(loop().cancel_timer(id));
  EXPECT_FALSE(loop().cancel_timer(id));
  EXPECT_TRUE(loop().run_for([&] { return other; }, 5s));
  EXPECT_FALSE(fired);
}

TEST_F(LoopTest, CancelAnotherTimerInsideACallback) {
  // Both due at once: the first cancels the second, which must not run.
  bool second_fired = false;
  bool first_fired = false;
  TimerId second = 0;
  loop().add_timer(5ms, [&] {
    first_fired = true;
    EXPECT_TRUE(loop().cancel_timer(second));
  });
  second = loop().add_timer(5ms, [&] { second_fired = true; });
  bool later = false;
  loop().add_timer(30ms, [&] { later = true; });
  EXPECT_TRUE(loop().run_for([&] { return later; }, 5s));
  EXPECT_TRUE(first_fired);
  EXPECT_FALSE(second_fired);
}

TEST_F(LoopTest, PeriodicTimerCancelsItself) {
  int ticks = 0;
  TimerId id = 0;
  id = loop().add_periodic(2ms, [&] {
    if (++ticks == 5) loop().cancel_timer(id);
  });
  bool later = false;
  EXPECT_TRUE(loop().run_for([&] { return ticks >= 5; }, 5s));
  loop().add_timer(20ms, [&] { later = true; });
  EXPECT_TRUE(loop().run_for([&] { return later; }, 5s));
  EXPECT_EQ(ticks, 5);
}

TEST_F(LoopTest, TimerChurnDoesNotGrowWithoutBound) {
  // Many add+cancel pairs (per-operation timeouts): the loop stays correct and a live
  // timer among them still fires.
  bool fired = false;
  loop().add_timer(10ms, [&] { fired = true; });
  for (int i = 0; i < 100000; ++i) {
    EXPECT_TRUE(loop().cancel_timer(loop().add_timer(1h, [] {})));
  }
  EXPECT_TRUE(loop().run_for([&] { return fired; }, 5s));
}

TEST_F(LoopTest, RunUntilWithoutDeadline) {
  bool fired = false;
  loop().add_timer(5ms, [&] { fired = true; });
  EXPECT_TRUE(loop().run_until([&] { return fired; }, Clock::time_point::max()));
}

TEST_F(LoopTest, RunUntilHonoursDeadline) {
  const auto start = Clock::now();
  EXPECT_FALSE(loop().run_for([] { return false; }, 30ms));
  EXPECT_GE(Clock::now() - start, 30ms);
}

}  // namespace
}  // namespace rmsg
