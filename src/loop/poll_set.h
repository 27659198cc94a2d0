// PollSet: the loop's pollers (EventLoop::add_poller) and adaptive polling.
//
// A poller is a pair: poll() reaps work without blocking (an RDMA stream polls its CQs)
// and returns true if it found any; arm() asks for an fd wakeup for the next work (the
// stream requests CQ notifications) and returns true if it armed something just now,
// false if it already was armed (or has no wakeup). The loop drives three phases:
//   busy   (EventLoop::set_busy_poll) poll every iteration, never arm, never sleep;
//   spin   after an iteration that ran work, poll in a loop for a bounded time before
//          sleeping (EventLoopOptions::poll_spin), so that a reply arriving within the
//          budget costs no wakeup at all;
//   arm    before the loop waits in epoll_wait: arm every poller, then poll once more
//          each one that armed now (work landing between its last poll and its arm raised
//          no wakeup), and sleep only if that found nothing.
//
// The spin does not read the clock on every pass (clock_gettime may be a system call, as
// in a TCG guest without a stable TSC): it checks its deadline, and yields the CPU
// (sched_yield: a spinning vCPU must not starve the kernel's own RDMA work, as rxe's) every
// kCheckEvery empty passes.
//
// Threading: the loop thread only; add/remove are safe from inside a poller.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "rmsg/counters.h"
#include "rmsg/loop_time.h"

namespace rmsg::loop {

class PollSet {
 public:
  static constexpr std::uint32_t kCheckEvery = 16;  // empty spin passes per clock read / yield

  PollSet(CounterSet& counters, bool yield);

  void add(std::uint64_t id, std::function<bool()> poll, std::function<bool()> arm);
  void remove(std::uint64_t id);
  bool empty() const noexcept { return pollers_.empty(); }

  // One pass over every poller: how many found work. Inline: a busy loop makes one per
  // iteration at least.
  int poll_all() {
    // A copy of the shared_ptrs would allocate on every spin pass; the vector is only
    // rebuilt at the start of a later pass, so iterating it by index stays valid, and it
    // keeps each poller alive through the pass even if the poller removes itself (no
    // shared_ptr copy per poller: two locked instructions on every spin pass).
    const auto& pollers = snapshot();
    int found = 0;
    for (std::size_t i = 0, n = pollers.size(); i < n; ++i) {
      Poller* const p = pollers[i].get();
      if (!p->removed && p->poll()) ++found;
    }
    return found;
  }
  // Arms every poller, then polls those that armed now: how many of them found work.
  int arm_all();
  // Polls until a pass finds work (returns how many found it), `interrupt` is set, or
  // steady_clock reaches `limit` (returns 0).
  int spin(Clock::time_point limit, const std::atomic<bool>& interrupt);

 private:
  struct Poller {
    std::function<bool()> poll;
    std::function<bool()> arm;
    bool removed = false;  // removed during a pass: the rest of the pass skips it
  };
  // A pass runs over a snapshot, rebuilt (without allocating, once its capacity fits)
  // only after pollers were added or removed: a poller may add or remove pollers.
  const std::vector<std::shared_ptr<Poller>>& snapshot() {
    if (!snapshot_valid_) rebuild_snapshot();
    return snapshot_;
  }
  void rebuild_snapshot();

  std::map<std::uint64_t, std::shared_ptr<Poller>> pollers_;
  std::vector<std::shared_ptr<Poller>> snapshot_;
  bool snapshot_valid_ = false;
  const bool yield_;
  Counter& spins_;
  Counter& spin_polls_;
  Counter& arms_;
  Counter& yields_;
};

}  // namespace rmsg::loop
