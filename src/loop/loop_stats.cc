#include "loop/loop_stats.h"

namespace rmsg::loop {

LoopStats::LoopStats(bool cpu_time)
    : iterations_(set_.counter("loop.iterations")),
      callbacks_(set_.counter("loop.callbacks")),
      wakeups_(set_.counter("loop.wakeups")),
      eventfd_wakeups_(set_.counter("loop.eventfd_wakeups")),
      posted_(set_.counter("loop.posted_tasks")),
      timers_fired_(set_.counter("loop.timers_fired")),
      epoll_waits_(set_.counter("loop.epoll_waits")),
      epoll_skips_(set_.counter("loop.epoll_skips")),
      iteration_ns_(set_.histogram("loop.iteration_ns")),
      callback_cpu_ns_(set_.histogram("loop.callback_cpu_ns")),
      cpu_time_(cpu_time) {}

void LoopStats::after_callback() noexcept {
  callbacks_.add_owned();
  if (!cpu_time_) return;
  const auto now = read_ns(CLOCK_THREAD_CPUTIME_ID);
  callback_cpu_ns_.record(now - cpu_mark_);
  cpu_mark_ = now;
}

}  // namespace rmsg::loop
