// LoopThreads (rmsg/loop_threads.h): loops on threads of their own, pinned to CPUs when
// asked, and pin_this_thread's checks.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <thread>
#include <vector>

#include "rmsg/loop_threads.h"

namespace rmsg {
namespace {

std::vector<int> cpus_in(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// The CPUs this process may run on.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  return cpus_in(set);
}

// The calling thread's affinity mask.
std::vector<int> this_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof set, &set), 0);
  return cpus_in(set);
}

TEST(LoopThreads, EachLoopThreadRunsOnlyOnItsCpu) {
  const auto allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  // The last allowed CPU and the first: two loops, and a third that wraps to the first.
  const std::vector<int> cpus{allowed.back(), allowed.front()};
  auto threads = LoopThreads::create(3, {}, cpus);
  ASSERT_TRUE(threads.ok()) << threads.error().message();
  threads.value()->start();
  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<int> seen;
    int on = -1;
    threads.value()->run_sync(i, [&] {
      seen = this_thread_cpus();
      on = sched_getcpu();
    });
    EXPECT_EQ(seen, std::vector<int>{cpus[i % 2]}) << "loop " << i;
    EXPECT_EQ(on, cpus[i % 2]) << "loop " << i;
  }
  threads.value()->stop();
}

TEST(LoopThreads, UnpinnedLoopThreadsKeepTheProcessMask) {
  auto threads = LoopThreads::create(1);
  ASSERT_TRUE(threads.ok());
  threads.value()->start();
  std::vector<int> seen;
  threads.value()->run_sync(0, [&] { seen = this_thread_cpus(); });
  EXPECT_EQ(seen, allowed_cpus());
}

TEST(LoopThreads, ACpuTheMachineDoesNotHaveIsRefused) {
  const int outside = CPU_SETSIZE - 1;  // no machine here has 1024 CPUs in the mask
  ASSERT_NE(allowed_cpus().back(), outside);
  const int bad[] = {outside};
  auto t = LoopThreads::create(1, {}, bad);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(), make_error_code(Errc::invalid_argument));
  const int negative[] = {-1};
  EXPECT_EQ(LoopThreads::create(1, {}, negative).error(), make_error_code(Errc::invalid_argument));
}

TEST(PinThisThread, PinsTheCallerOnlyAndRefusesBadCpus) {
  const auto allowed = allowed_cpus();
  std::vector<int> pinned;
  std::thread t([&] {
    ASSERT_TRUE(pin_this_thread(allowed.back()).ok());
    pinned = this_thread_cpus();
  });
  t.join();
  EXPECT_EQ(pinned, std::vector<int>{allowed.back()});
  EXPECT_EQ(this_thread_cpus(), allowed);  // the test's own thread is untouched
  EXPECT_EQ(pin_this_thread(-1).error(), make_error_code(Errc::invalid_argument));
  EXPECT_EQ(pin_this_thread(CPU_SETSIZE).error(), make_error_code(Errc::invalid_argument));
}

}  // namespace
}  // namespace rmsg
