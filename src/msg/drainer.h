// Drainer: the scaffolding of a graceful shutdown that waits for what is owed, shared by a
// messenger shard (messenger_drain.cc: every queue acknowledged) and an RPC shard
// (rpc_drain.cc: every call and responder through). A drain ends exactly once: when a
// check finds nothing owed any more (confirmed after the loop's next turn, so never inside
// the handler that emptied the last queue), or at the deadline, whichever comes first; then
// the owner's `end` runs. What a drain refuses meanwhile, and what `end` does, stay the
// owner's.
//
// Lifetime: a member of its owner; every timer and deferred task it leaves first locks
// `owner` (the weak reference start() is given), so nothing runs on a destroyed owner.
// abandon() (the owner closing) ends a drain without running `end`.
//
// Threading: the owner's loop thread.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "rmsg/event_loop.h"

namespace rmsg::msg {

class Drainer {
 public:
  explicit Drainer(EventLoop& loop) noexcept : loop_(loop) {}
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;
  Drainer(Drainer&&) = delete;
  Drainer& operator=(Drainer&&) = delete;
  ~Drainer() { abandon(); }

  bool draining() const noexcept { return draining_; }

  // Starts a drain (not while one runs): `drained` says whether nothing is owed any more,
  // `end` is the owner's end of the drain.
  void start(std::weak_ptr<void> owner, Clock::time_point deadline, std::function<bool()> drained,
             std::function<void()> end) {
    draining_ = true;
    owner_ = std::move(owner);
    drained_ = std::move(drained);
    end_ = std::move(end);
    Duration left = deadline - loop_.now();
    if (left < Duration::zero()) left = Duration::zero();
    timer_ = loop_.add_timer(left, [this, weak = owner_] {
      const std::shared_ptr<void> keep = weak.lock();  // through `end`, as it may drop it
      if (!keep) return;
      timer_ = 0;
      finish();
    });
    check();
  }

  // After something owed went (an ack, a reset, a call completed): ends the drain if that
  // was the last. Inline, the test whether a drain runs: the data path asks on every ack.
  void check() {
    if (draining_) check_slow();
  }

  // Ends the drain now (once): the timer goes, then the owner's `end` runs.
  void finish() {
    if (!draining_) return;
    draining_ = false;
    if (timer_ != 0) loop_.cancel_timer(timer_);
    timer_ = 0;
    drained_ = nullptr;
    std::function<void()> end = std::move(end_);
    end_ = nullptr;
    if (end) end();
  }

  // Ends the drain without running `end` (the owner is closing).
  void abandon() noexcept {
    draining_ = false;
    if (timer_ != 0) loop_.cancel_timer(timer_);
    timer_ = 0;
    drained_ = nullptr;
    end_ = nullptr;
  }

 private:
  void check_slow() {
    if (check_queued_ || !drained_()) return;
    // Not inside the handler (or send) that emptied the last queue.
    check_queued_ = true;
    loop_.defer([this, weak = owner_] {
      const std::shared_ptr<void> keep = weak.lock();
      if (!keep) return;
      check_queued_ = false;
      if (draining_ && drained_()) finish();
    });
  }

  EventLoop& loop_;
  bool draining_ = false;
  bool check_queued_ = false;
  TimerId timer_ = 0;
  std::weak_ptr<void> owner_;
  std::function<bool()> drained_;
  std::function<void()> end_;
};

}  // namespace rmsg::msg
