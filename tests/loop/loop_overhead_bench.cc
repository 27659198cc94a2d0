// loop_overhead_bench: the per-iteration cost of the loop and of its instrumentation.
// Not a test (nothing is asserted); run it by hand, or under callgrind for instruction
// counts that do not depend on the machine:
//   loop_overhead_bench [iterations [case]]       (case: idle, off, on; default: all three)
//   valgrind --tool=callgrind loop_overhead_bench 100000 on
// Cases: an idle poll (run_once(0) with nothing to do), and an iteration that runs one
// deferred task which defers itself again, with the callback CPU clock on and off.
//
// Measured (callgrind, instructions per iteration, RelWithDebInfo, GCC 12; "before" is the
// loop without instrumentation or clock, commit e4b5da4):
//   idle poll                 107 before, 123 now
//   one task, cpu clock off   546 before, 664 now (two CLOCK_MONOTONIC reads, the counters)
//   one task, cpu clock on    546 before, 720 now, plus two CLOCK_THREAD_CPUTIME_ID system
//                             calls, 0.55-0.65 us each in this KVM guest (CLOCK_MONOTONIC:
//                             0.05 us): why the CPU clock is opt-in.
// Wall times on the shared 2-core build machine were too noisy to compare (1.1-2.1 us per
// one-task iteration either way).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "rmsg/event_loop.h"

namespace {

using rmsg::EventLoop;
using rmsg::EventLoopOptions;

double ns_per(std::chrono::steady_clock::duration d, long n) {
  return std::chrono::duration<double, std::nano>(d).count() / static_cast<double>(n);
}

int run_case(const char* name, bool cpu_time, bool with_task, long n) {
  EventLoopOptions options;
  options.callback_cpu_time = cpu_time;
  auto created = EventLoop::create(options);
  if (!created) return std::fprintf(stderr, "create: %s\n", created.error().message().c_str()), 1;
  EventLoop& loop = *created.value();
  std::function<void()> task = [&] { loop.defer(task); };
  if (with_task) loop.defer(task);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    if (!loop.run_once(rmsg::Duration::zero())) return 1;
  }
  const auto t = std::chrono::steady_clock::now() - t0;
  std::printf("%-28s %8.1f ns/iteration  (callbacks %llu)\n", name, ns_per(t, n),
              static_cast<unsigned long long>(loop.counters().value("loop.callbacks")));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const char* only = argc > 2 ? argv[2] : nullptr;
  auto wanted = [only](const char* c) { return only == nullptr || std::strcmp(only, c) == 0; };
  int rc = 0;
  if (wanted("idle")) rc |= run_case("idle poll", true, false, n);
  if (wanted("off")) rc |= run_case("one task, cpu clock off", false, true, n);
  if (wanted("on")) rc |= run_case("one task, cpu clock on", true, true, n);
  return rc;
}
