// The time and randomness an EventLoop hands to the layers above it: the clock behind its
// timers and deadlines (steady_clock, or a ManualClock that only moves when told to), and a
// seeded pseudo-random source for jitter. Both exist so that backoff, keepalive and
// deadline logic can be tested deterministically: a test fixes the seed and steps time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "rmsg/export.h"

namespace rmsg {

using Clock = std::chrono::steady_clock;
using Duration = std::chrono::nanoseconds;

// A clock that stands still until advanced; time points are Clock::time_points, so every
// deadline computed from EventLoop::now() works unchanged. It never goes backwards.
//
// Thread-safety: every method from any thread. Advancing wakes no loop: advance on the
// loop's thread (between run_once() calls or inside a callback), or post() to the loop
// afterwards so that it looks at its timers again. A loop with a manual clock does not
// use its timerfd; see EventLoopOptions::clock for what that changes.
class RMSG_EXPORT ManualClock {
 public:
  // Far from the epoch, so that "time_point{}" stays usable as a "never" marker.
  static constexpr Clock::time_point kDefaultStart{std::chrono::hours(1)};

  explicit ManualClock(Clock::time_point start = kDefaultStart) noexcept
      : ns_(start.time_since_epoch().count()) {}

  Clock::time_point now() const noexcept {
    return Clock::time_point(Duration(ns_.load(std::memory_order_acquire)));
  }
  // Moves time forward by d (a negative d is ignored).
  void advance(Duration d) noexcept {
    if (d > Duration::zero()) ns_.fetch_add(d.count(), std::memory_order_acq_rel);
  }
  // Moves time forward to t; does nothing if t is not later than now().
  void advance_to(Clock::time_point t) noexcept {
    auto cur = ns_.load(std::memory_order_relaxed);
    const auto want = t.time_since_epoch().count();
    while (cur < want && !ns_.compare_exchange_weak(cur, want, std::memory_order_acq_rel)) {
    }
  }

 private:
  std::atomic<Duration::rep> ns_;
};

// A small pseudo-random generator (xoshiro256**, seeded through splitmix64). The sequence
// depends only on the seed: the same on every platform, compiler and standard library
// (which is why it does not hand out std:: distributions, whose output is
// implementation-defined). Not for cryptography.
//
// Thread-safety: none; the loop's instance (EventLoop::random()) is loop-thread-only.
class RMSG_EXPORT Random {
 public:
  explicit Random(std::uint64_t seed) noexcept;

  // The seed it was created with (tests print it so that a failure can be replayed).
  std::uint64_t seed() const noexcept { return seed_; }
  // 64 uniformly random bits.
  std::uint64_t next() noexcept;
  // Uniform in [0, n); 0 when n == 0.
  std::uint64_t below(std::uint64_t n) noexcept;
  // Uniform in [lo, hi] (lo when hi <= lo): for example the jitter of a backoff step.
  Duration between(Duration lo, Duration hi) noexcept;

 private:
  std::uint64_t seed_;
  std::uint64_t s_[4];
};

}  // namespace rmsg
