// The loop's instrumentation (EventLoop::counters()).
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "rmsg/event_loop.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;

// A loop with every instrument on (the callback CPU clock is opt-in).
class LoopCountersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EventLoopOptions options;
    options.callback_cpu_time = true;
    auto r = EventLoop::create(options);
    ASSERT_TRUE(r.ok()) << r.error().message();
    loop_ = std::move(r).value();
  }
  EventLoop& loop() { return *loop_; }
  std::unique_ptr<EventLoop> loop_;
};

std::uint64_t value(const EventLoop& loop, std::string_view name) {
  return loop.counters().value(name);
}

const Histogram& histogram(const EventLoop& loop, std::string_view name) {
  const Histogram* h = loop.counters().find_histogram(name);
  EXPECT_NE(h, nullptr) << name;
  static const Histogram empty;
  return h != nullptr ? *h : empty;
}

std::uint64_t at_or_above(const Histogram& h, std::uint64_t v) {
  std::uint64_t n = 0;
  for (int i = Histogram::bucket_of(v); i < Histogram::kBuckets; ++i) n += h.bucket(i);
  return n;
}

void spin_cpu(std::chrono::nanoseconds d) {
  // Burns CPU (not wall time: a sleep would not show in the thread's CPU clock).
  timespec t0, t;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  do {
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1'000'000'000 + (t.tv_nsec - t0.tv_nsec) < d.count());
}

TEST_F(LoopCountersTest, CountersStartAtZero) {
  for (auto name : {"loop.iterations", "loop.callbacks", "loop.wakeups", "loop.eventfd_wakeups",
                    "loop.posted_tasks", "loop.timers_fired"}) {
    EXPECT_EQ(value(loop(), name), 0u) << name;
  }
  EXPECT_EQ(histogram(loop(), "loop.iteration_ns").count(), 0u);
  EXPECT_EQ(histogram(loop(), "loop.callback_cpu_ns").count(), 0u);
}

TEST_F(LoopCountersTest, PostsBeforeTheLoopRunsAreOneWakeupAndOneIteration) {
  int ran = 0;
  for (int i = 0; i < 10; ++i) loop().post([&] { ++ran; });
  ASSERT_TRUE(loop().run_for([&] { return ran == 10; }, 5s));
  EXPECT_EQ(value(loop(), "loop.posted_tasks"), 10u);
  EXPECT_EQ(value(loop(), "loop.callbacks"), 10u);
  EXPECT_EQ(value(loop(), "loop.eventfd_wakeups"), 1u);  // one eventfd write for ten posts
  EXPECT_EQ(value(loop(), "loop.wakeups"), 1u);
  EXPECT_EQ(value(loop(), "loop.iterations"), 1u);
  EXPECT_EQ(histogram(loop(), "loop.callback_cpu_ns").count(), 10u);
  EXPECT_EQ(histogram(loop(), "loop.iteration_ns").count(), 1u);
}

TEST_F(LoopCountersTest, PostsFromAnotherThreadAreCountedWhileAReaderWatches) {
  constexpr int kTasks = 2000;
  std::atomic<int> ran{0};
  std::atomic<bool> stop_reading{false};
  std::uint64_t last_seen = 0;
  bool monotonic = true;
  std::thread poster([&] {
    for (int i = 0; i < kTasks; ++i) loop().post([&] { ran.fetch_add(1); });
  });
  std::thread reader([&] {  // reads while the loop thread writes (TSan checks the rule)
    while (!stop_reading.load()) {
      const auto v = value(loop(), "loop.posted_tasks");
      monotonic = monotonic && v >= last_seen;
      last_seen = v;
      (void)histogram(loop(), "loop.callback_cpu_ns").count();
    }
  });
  const bool done = loop().run_for([&] { return ran.load() == kTasks; }, 10s);
  poster.join();
  stop_reading = true;
  reader.join();
  ASSERT_TRUE(done);
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(value(loop(), "loop.posted_tasks"), std::uint64_t{kTasks});
  EXPECT_GE(value(loop(), "loop.callbacks"), std::uint64_t{kTasks});
  const auto eventfd = value(loop(), "loop.eventfd_wakeups");
  EXPECT_GE(eventfd, 1u);
  EXPECT_LE(eventfd, std::uint64_t{kTasks});
  EXPECT_GE(value(loop(), "loop.wakeups"), eventfd);
  EXPECT_GE(value(loop(), "loop.iterations"), value(loop(), "loop.wakeups"));
}

TEST_F(LoopCountersTest, TimersAndDeferredTasksAreCallbacks) {
  int fired = 0;
  loop().add_timer(0ms, [&] { ++fired; });
  loop().add_timer(1ms, [&] { ++fired; });
  loop().defer([] {});
  ASSERT_TRUE(loop().run_for([&] { return fired == 2; }, 5s));
  EXPECT_EQ(value(loop(), "loop.timers_fired"), 2u);
  EXPECT_EQ(value(loop(), "loop.callbacks"), 3u);
  EXPECT_EQ(value(loop(), "loop.posted_tasks"), 0u);
}

TEST_F(LoopCountersTest, ABusyCallbackShowsInTheUpperCpuBuckets) {
  bool done = false;
  for (int i = 0; i < 5; ++i) loop().defer([] {});  // cheap ones
  loop().defer([&] {
    spin_cpu(4ms);
    done = true;
  });
  ASSERT_TRUE(loop().run_for([&] { return done; }, 5s));
  const Histogram& cpu = histogram(loop(), "loop.callback_cpu_ns");
  EXPECT_EQ(cpu.count(), 6u);
  EXPECT_EQ(at_or_above(cpu, 4'000'000), 1u);  // the busy one, and only it
  EXPECT_GE(cpu.sum(), 4'000'000u);
  // Its iteration took at least as long in real time.
  EXPECT_EQ(at_or_above(histogram(loop(), "loop.iteration_ns"), 4'000'000), 1u);
}

TEST_F(LoopCountersTest, IdleWaitsAreIterationsWithoutWakeups) {
  ASSERT_TRUE(loop().run_once(1ms).ok());
  ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_EQ(value(loop(), "loop.iterations"), 2u);
  EXPECT_EQ(value(loop(), "loop.wakeups"), 0u);
  EXPECT_EQ(value(loop(), "loop.callbacks"), 0u);
  EXPECT_EQ(histogram(loop(), "loop.iteration_ns").count(), 0u);  // only busy iterations
}

TEST(LoopCounters, CpuTimeIsOffByDefault) {
  auto r = EventLoop::create();
  ASSERT_TRUE(r.ok());
  EventLoop& loop = *r.value();
  int ran = 0;
  loop.post([&] { ++ran; });
  ASSERT_TRUE(loop.run_for([&] { return ran == 1; }, 5s));
  EXPECT_EQ(value(loop, "loop.callbacks"), 1u);
  EXPECT_EQ(histogram(loop, "loop.callback_cpu_ns").count(), 0u);
  EXPECT_EQ(histogram(loop, "loop.iteration_ns").count(), 1u);
}

TEST(LoopCounters, ABusyPollPassThatFoundWorkIsOneCallback) {
  EventLoopOptions options;
  options.callback_cpu_time = true;
  auto r = EventLoop::create(options);
  ASSERT_TRUE(r.ok());
  EventLoop& loop = *r.value();
  loop.set_busy_poll(true);
  int polls = 0;
  loop.add_poller([&] { return ++polls % 2 == 0; });  // work on every other pass
  loop.add_poller([] { return false; });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(loop.run_once(0ms).ok());
  EXPECT_EQ(value(loop, "loop.iterations"), 4u);
  EXPECT_EQ(value(loop, "loop.callbacks"), 2u);
  EXPECT_EQ(histogram(loop, "loop.iteration_ns").count(), 2u);
  EXPECT_EQ(histogram(loop, "loop.callback_cpu_ns").count(), 0u);  // passes are not timed
}

}  // namespace
}  // namespace rmsg
