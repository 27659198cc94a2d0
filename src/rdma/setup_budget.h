// SetupBudget: a loop's bound on the connection-setup calls it makes per iteration, so
// that a burst of connect requests does not hold the loop for all of their verbs and
// rdma_cm calls at once (each is a system call; under Soft-RoCE in an emulated guest a
// structure's dozen of them take tens of milliseconds, which every other connection on
// the loop waits out). Work that finds no budget left is deferred to a later iteration by
// its owner (the Acceptor) and counted.
//
// What is charged: a passive accept is charged kAcceptSetupCalls, the calls a fresh
// structure and its accept take (completion channels, CQs, memory registrations and the QP:
// 7; three QP transitions and rdma_accept: 4), whether or not the structure comes from a
// connection manager's pool (the budget bounds the worst case).
//
// Counters (counters()): setup.calls (charged), setup.deferred (charges refused: the work
// waited for a later iteration), setup.max_calls_per_iteration (a gauge: the most charged
// in one iteration).
//
// Ownership: a per-loop service (EventLoop::set_service). Threading: the loop thread.
#pragma once

#include <cstdint>
#include <memory>

#include "rmsg/counters.h"
#include "rmsg/event_loop.h"

namespace rmsg::rdma {

inline constexpr std::uint32_t kAcceptSetupCalls = 11;

class SetupBudget {
 public:
  explicit SetupBudget(EventLoop& loop);
  static std::shared_ptr<SetupBudget> of(EventLoop& loop);

  // Charges `calls` to the current iteration if they fit in `max` (0: no bound), or if
  // nothing was charged in it yet (a unit larger than the budget still goes, alone, so
  // work always progresses). False: nothing charged; do it in a later iteration.
  bool try_take(std::uint32_t calls, std::uint32_t max);

  const CounterSet& counters() const noexcept { return set_; }

 private:
  EventLoop& loop_;
  CounterSet set_;
  Counter& calls_;
  Counter& deferred_;
  Counter& max_per_iteration_;
  std::uint64_t iteration_ = ~std::uint64_t{0};  // loop.iterations when used_ was counted
  std::uint32_t used_ = 0;
};

}  // namespace rmsg::rdma
