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
      iteration_max_ns_(set_.counter("loop.iteration_max_ns")),
      callback_cpu_ns_(set_.histogram("loop.callback_cpu_ns")),
      cpu_time_(cpu_time) {}

std::array<std::uint64_t, Histogram::kBuckets> snapshot(const Histogram& h) noexcept {
  std::array<std::uint64_t, Histogram::kBuckets> out{};
  for (int i = 0; i < Histogram::kBuckets; ++i) out[static_cast<std::size_t>(i)] = h.bucket(i);
  return out;
}

std::uint64_t quantile_bound(const std::array<std::uint64_t, Histogram::kBuckets>& buckets,
                             double q) noexcept {
  std::uint64_t total = 0;
  for (const auto b : buckets) total += b;
  if (total == 0) return 0;
  // The smallest bucket at which the running count reaches ceil(q * total).
  auto need = static_cast<std::uint64_t>(q * static_cast<double>(total));
  if (static_cast<double>(need) < q * static_cast<double>(total)) ++need;
  if (need == 0) need = 1;
  std::uint64_t seen = 0;
  for (int i = 0; i < Histogram::kBuckets; ++i) {
    seen += buckets[static_cast<std::size_t>(i)];
    if (seen >= need) {
      const auto bound = Histogram::upper_bound(i);
      return bound != 0 ? bound : std::uint64_t{1} << (Histogram::kBuckets - 1);
    }
  }
  return std::uint64_t{1} << (Histogram::kBuckets - 1);
}

void LoopStats::after_callback() noexcept {
  callbacks_.add_owned();
  if (!cpu_time_) return;
  const auto now = read_ns(CLOCK_THREAD_CPUTIME_ID);
  callback_cpu_ns_.record(now - cpu_mark_);
  cpu_mark_ = now;
}

}  // namespace rmsg::loop
