// RMSG_ASSERT_LOOP_THREAD (src/loop/loop_thread.h): Debug builds abort a loop-thread-only
// call from another thread once the loop runs; before the first run any thread may call.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "loop/loop_thread.h"
#include "rmsg/event_loop.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;

TEST(LoopThread, AnyThreadMayCallBeforeTheLoopFirstRuns) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  bool fired = false;
  bool other_saw_loop_thread = false;
  std::thread other([&] {
    other_saw_loop_thread = loop.value()->in_loop_thread();
    loop.value()->add_timer(0ms, [&] { fired = true; });
  });
  other.join();
  EXPECT_TRUE(other_saw_loop_thread);
  EXPECT_TRUE(loop.value()->run_for([&] { return fired; }, 5s));
  EXPECT_TRUE(loop.value()->in_loop_thread());
}

TEST(LoopThread, OtherThreadIsNotTheLoopThreadOnceItRan) {
  auto loop = EventLoop::create();
  ASSERT_TRUE(loop.ok());
  ASSERT_TRUE(loop.value()->run_once(0ms).ok());
  bool other_saw_loop_thread = true;
  std::thread other([&] { other_saw_loop_thread = loop.value()->in_loop_thread(); });
  other.join();
  EXPECT_FALSE(other_saw_loop_thread);
}

#ifndef NDEBUG
TEST(LoopThreadDeathTest, LoopThreadOnlyCallFromAnotherThreadAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto loop = EventLoop::create();
        if (!loop) return;
        (void)loop.value()->run_once(0ms);
        std::thread other([&] { loop.value()->add_timer(1s, [] {}); });
        other.join();
      },
      "add_timer.*loop-thread-only");
}
#endif  // release builds (NDEBUG) compile the assertion out, and this case with it

}  // namespace
}  // namespace rmsg
