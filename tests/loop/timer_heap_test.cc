// TimerHeap against a plain model: next() and pop_due() agree with the earliest live
// deadline through random adds, cancels (of the top, too) and pops, periodic timers
// included. next() skips its look-up while the top is known live (timer_heap.h), so a
// cancel or pop that leaves a stale top must still be seen.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kit/seed.h"
#include "loop/timer_heap.h"

namespace rmsg::loop {
namespace {

using namespace std::chrono_literals;

struct Model {
  struct T {
    Clock::time_point deadline;
    Duration period;
  };
  std::map<TimerId, T> live;
  Clock::time_point next() const {
    auto best = Clock::time_point::max();
    for (const auto& [id, t] : live) best = std::min(best, t.deadline);
    return best;
  }
};

TEST(TimerHeap, NextAndPopAgreeWithAModelThroughCancelsOfTheTop) {
  TimerHeap heap;
  Model model;
  auto rng = testing::test_rng("timer-heap");
  const Clock::time_point t0{};
  Clock::time_point now = t0;
  TimerId next_id = 1;
  int fired = 0;
  std::uniform_int_distribution<int> op(0, 9);
  std::uniform_int_distribution<int> ms(1, 50);
  for (int step = 0; step < 20000; ++step) {
    const int o = op(rng);
    if (o < 4) {
      const TimerId id = next_id++;
      const auto deadline = now + std::chrono::milliseconds(ms(rng));
      const Duration period = o == 0 ? std::chrono::milliseconds(ms(rng)) : Duration::zero();
      heap.add(id, deadline, period, [&fired] { ++fired; });
      model.live[id] = {deadline, period};
    } else if (o < 7 && !model.live.empty()) {
      // Cancel the earliest timer half of the time: that leaves a stale top behind.
      auto victim = model.live.begin();
      if (o == 4) {
        for (auto it = model.live.begin(); it != model.live.end(); ++it) {
          if (it->second.deadline < victim->second.deadline) victim = it;
        }
      } else {
        std::uniform_int_distribution<std::size_t> pick(0, model.live.size() - 1);
        std::advance(victim, pick(rng));
      }
      ASSERT_TRUE(heap.cancel(victim->first));
      ASSERT_FALSE(heap.cancel(victim->first));
      model.live.erase(victim);
    } else {
      now += std::chrono::milliseconds(ms(rng) / 4);
      while (auto task = heap.pop_due(now)) {
        (*task)();
        // The model's earliest due timer is the one that fired (ties: any of them).
        auto due = model.live.end();
        for (auto it = model.live.begin(); it != model.live.end(); ++it) {
          if (it->second.deadline <= now &&
              (due == model.live.end() || it->second.deadline < due->second.deadline)) {
            due = it;
          }
        }
        ASSERT_NE(due, model.live.end()) << "a timer fired that the model has not due";
        if (due->second.period > Duration::zero()) {
          due->second.deadline = now + due->second.period;
        } else {
          model.live.erase(due);
        }
      }
      for (const auto& [id, t] : model.live) ASSERT_GT(t.deadline, now) << "left due: " << id;
    }
    ASSERT_EQ(heap.next(), model.next()) << "step " << step;
    ASSERT_EQ(heap.next(), model.next()) << "a second next() disagrees, step " << step;
  }
  EXPECT_GT(fired, 1000);
}

}  // namespace
}  // namespace rmsg::loop
