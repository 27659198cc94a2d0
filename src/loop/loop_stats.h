// LoopStats: the loop's instrumentation (the entries EventLoop::counters() documents).
// Written on the loop thread only (add_owned / Histogram::record: no atomic
// read-modify-write); any thread may read the set.
//
// Cost: two CLOCK_MONOTONIC reads per iteration that runs a callback (vDSO, no syscall)
// and one CLOCK_THREAD_CPUTIME_ID read per callback plus one per such iteration: each
// reading closes one callback's interval and opens the next one's (so the loop's own
// bookkeeping between two callbacks is charged to the second). That clock is a system
// call, so the CPU histogram is opt-in (EventLoopOptions::callback_cpu_time).
// An iteration that runs nothing (an idle poll) costs a counter store or two; a poller
// pass that finds nothing reads no clock.
#pragma once

#include <time.h>

#include <array>
#include <cstdint>

#include "rmsg/counters.h"

namespace rmsg::loop {

// The exclusive upper bound (ns) of the bucket that holds the q-quantile (0 < q <= 1) of
// the values `h` recorded, as counted from `buckets` (h's own, or a difference of two
// snapshots: a phase of a run); 0 when nothing was recorded. Power-of-two buckets: the
// true quantile is in [bound / 2, bound).
std::uint64_t quantile_bound(const std::array<std::uint64_t, Histogram::kBuckets>& buckets,
                             double q) noexcept;
std::array<std::uint64_t, Histogram::kBuckets> snapshot(const Histogram& h) noexcept;

class LoopStats {
 public:
  explicit LoopStats(bool cpu_time);

  const CounterSet& set() const noexcept { return set_; }

  // When a callback or a poller's work started this iteration's dispatch time: its
  // CLOCK_MONOTONIC reading in nanoseconds (the loop's timer check reuses it); 0 when
  // nothing ran yet.
  std::uint64_t dispatch_start_ns() const noexcept { return started_ ? wall_start_ : 0; }

  void begin_iteration() noexcept {
    iterations_.add_owned();
    started_ = false;
  }
  // epoll_wait returned `events` events (0: a timeout or an interrupted wait).
  void woke(int events) noexcept {
    if (events > 0) wakeups_.add_owned();
  }
  void eventfd_woke() noexcept { eventfd_wakeups_.add_owned(); }
  void posted(std::uint64_t n) noexcept { posted_.add_owned(n); }
  void timer_fired() noexcept { timers_fired_.add_owned(); }

  // Runs one callback and accounts for it.
  template <class F>
  void run(F&& callback) {
    if (!started_) start();
    callback();
    after_callback();
  }

  // Runs the busy-poll pollers (`pass` returns how many found work). A pass runs on
  // every iteration, so it is not CPU-timed (that would be a system call per spin); one
  // that found work counts as a callback and starts the iteration's dispatch time.
  // The clock is read only after a pass that found work (a spin makes many passes that
  // find nothing), so the dispatch time starts after the pass.
  template <class F>
  int poll_pass(F&& pass) {
    const int found = pass();
    if (found > 0) {
      callbacks_.add_owned();
      if (!started_) start();
    }
    return found;
  }
  // epoll_wait was called (false: skipped, pollers had found work).
  void epoll_called(bool called) noexcept {
    if (called) {
      epoll_waits_.add_owned();
    } else {
      epoll_skips_.add_owned();
    }
  }
  CounterSet& mutable_set() noexcept { return set_; }

  // Ends the iteration begun at begin_iteration(): records its dispatch time if it ran
  // anything. Inline, as start(): a busy loop runs both for every message.
  void end_iteration() noexcept {
    if (!started_) return;
    started_ = false;
    const std::uint64_t ns = read_ns(CLOCK_MONOTONIC) - wall_start_;
    iteration_ns_.record(ns);
    if (ns > max_ns_) {
      max_ns_ = ns;
      iteration_max_ns_.set(ns);
    }
  }

 private:
  static std::uint64_t read_ns(clockid_t clock) noexcept {
    timespec ts;
    ::clock_gettime(clock, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(ts.tv_nsec);
  }
  void start() noexcept {
    started_ = true;
    wall_start_ = read_ns(CLOCK_MONOTONIC);
    if (cpu_time_) cpu_mark_ = read_ns(CLOCK_THREAD_CPUTIME_ID);
  }
  void after_callback() noexcept;

  CounterSet set_;
  Counter& iterations_;
  Counter& callbacks_;
  Counter& wakeups_;
  Counter& eventfd_wakeups_;
  Counter& posted_;
  Counter& timers_fired_;
  Counter& epoll_waits_;
  Counter& epoll_skips_;
  Histogram& iteration_ns_;
  Counter& iteration_max_ns_;  // a gauge: the longest iteration_ns recorded
  Histogram& callback_cpu_ns_;
  const bool cpu_time_;
  bool started_ = false;          // a callback ran in this iteration
  std::uint64_t wall_start_ = 0;  // CLOCK_MONOTONIC at the first callback
  std::uint64_t cpu_mark_ = 0;    // thread CPU time at the end of the previous callback
  std::uint64_t max_ns_ = 0;      // iteration_max_ns_'s value, without an atomic load
};

}  // namespace rmsg::loop
