#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kit/loop_fixture.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
using testing::LoopTest;

TEST_F(LoopTest, PostFromManyThreadsKeepsPerThreadOrder) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<int>> seen(kThreads);
  int total = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        loop().post([&, t, i] {
          EXPECT_TRUE(loop().in_loop_thread());
          seen[t].push_back(i);
          ++total;
        });
      }
    });
  }
  EXPECT_TRUE(loop().run_for([&] { return total == kThreads * kPerThread; }, 20s));
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<size_t>(kPerThread));
    for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(seen[t][i], i);
  }
}

TEST_F(LoopTest, PostWakesASleepingRun) {
  std::atomic<bool> ran{false};
  std::thread poster([&] {
    loop().post([&] {
      ran = true;
      loop().stop();
    });
  });
  ASSERT_TRUE(loop().run().ok());
  poster.join();
  EXPECT_TRUE(ran);
}

TEST_F(LoopTest, StopFromAnotherThread) {
  std::thread stopper([&] { loop().stop(); });
  ASSERT_TRUE(loop().run().ok());
  stopper.join();
}

}  // namespace
}  // namespace rmsg
