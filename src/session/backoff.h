// Backoff: the delay before a session's next connect attempt. Jittered exponential: the
// n-th consecutive failure waits a uniformly random time in [base/2, base], where base =
// initial * 2^(n-1) capped at max ("equal jitter": never less than half the step, so a
// flapping peer is not hammered, and sessions that failed together spread out instead of
// reconnecting in lock-step as msgr2's unjittered backoff does). The randomness is the
// loop's seeded source (EventLoop::random()), so a test with a fixed seed sees fixed
// delays. reset() after a connection was established.
//
// Threading: none (the session's loop thread).
#pragma once

#include <cstdint>

#include "rmsg/loop_time.h"

namespace rmsg::session {

struct BackoffPolicy {
  Duration initial = std::chrono::milliseconds(10);
  Duration max = std::chrono::seconds(2);
};

class Backoff {
 public:
  explicit Backoff(const BackoffPolicy& policy) noexcept : policy_(policy) {}

  // The delay before the next attempt, one failure more than before.
  Duration next(Random& random) noexcept {
    Duration base = policy_.initial;
    for (std::uint32_t i = 0; i < failures_ && base < policy_.max; ++i) base *= 2;
    if (base > policy_.max) base = policy_.max;
    ++failures_;
    return random.between(base / 2, base);
  }
  // The longest delay: after a WAIT (the peer is connecting to us; ours is the fallback).
  Duration longest(Random& random) noexcept { return random.between(policy_.max / 2, policy_.max); }
  void reset() noexcept { failures_ = 0; }
  std::uint32_t failures() const noexcept { return failures_; }

 private:
  BackoffPolicy policy_;
  std::uint32_t failures_ = 0;
};

}  // namespace rmsg::session
