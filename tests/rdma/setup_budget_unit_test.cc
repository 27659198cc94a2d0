// SetupBudget (src/rdma/setup_budget.h): the per-iteration bound on setup calls, on a plain
// loop (no device): what fits is charged, what does not is refused and counted, and a new
// iteration has the whole budget again.
#include <gtest/gtest.h>

#include "rdma/setup_budget.h"

namespace rmsg::rdma {
namespace {

using namespace std::chrono_literals;

std::uint64_t value(const SetupBudget& b, const char* name) {
  return b.counters().value(name);
}

TEST(SetupBudget, ChargesWithinAnIterationUpToTheBoundThenDefers) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  auto budget = SetupBudget::of(**loop);
  EXPECT_EQ(SetupBudget::of(**loop), budget);  // one per loop
  std::vector<bool> first, second;
  (*loop)->post([&] {
    for (int i = 0; i < 3; ++i) first.push_back(budget->try_take(11, 22));
    // A task deferred from a posted one runs in the same iteration: still spent.
    (*loop)->defer([&] {
      second.push_back(budget->try_take(11, 22));
      // Deferred from a deferred task: the next iteration, a fresh budget.
      (*loop)->defer([&] { second.push_back(budget->try_take(11, 22)); });
    });
  });
  ASSERT_TRUE((*loop)->run_for([&] { return second.size() == 2; }, 5s));
  EXPECT_EQ(first, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(second, (std::vector<bool>{false, true}));
  EXPECT_EQ(value(*budget, "setup.calls"), 33u);
  EXPECT_EQ(value(*budget, "setup.deferred"), 2u);
  EXPECT_EQ(value(*budget, "setup.max_calls_per_iteration"), 22u);
}

TEST(SetupBudget, AUnitLargerThanTheBoundGoesAloneAndZeroMeansNoBound) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  auto budget = SetupBudget::of(**loop);
  std::vector<bool> got;
  (*loop)->post([&] {
    got.push_back(budget->try_take(11, 5));  // alone: goes
    got.push_back(budget->try_take(1, 5));   // nothing more fits
    for (int i = 0; i < 10; ++i) got.push_back(budget->try_take(11, 0));
  });
  ASSERT_TRUE((*loop)->run_for([&] { return got.size() == 12; }, 5s));
  EXPECT_TRUE(got[0]);
  EXPECT_FALSE(got[1]);
  for (std::size_t i = 2; i < got.size(); ++i) EXPECT_TRUE(got[i]) << i;
  EXPECT_EQ(value(*budget, "setup.deferred"), 1u);
  EXPECT_EQ(value(*budget, "setup.max_calls_per_iteration"), 121u);
}

}  // namespace
}  // namespace rmsg::rdma
