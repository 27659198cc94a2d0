// DeadlineQueue: the deadlines of an endpoint's outstanding calls, so that one loop timer
// (armed at the earliest) serves every call instead of one timer inserted and cancelled
// per call. Pure logic (no I/O; time is passed in).
//
// And the conversions between a call's absolute deadline and the budget its request
// carries (docs/protocol.md, Messenger RPC), which saturate: time_point::max() (no
// deadline) travels as kNoBudget, and a budget too large for the receiver's clock
// (a hostile peer's, or one from a clock far behind) means no deadline, never a deadline
// in the past or a signed overflow.
//
// A completed call's entry is not removed (that would need a search); it is skipped when
// it reaches the front, and the queue rebuilds itself from the live calls once stale
// entries outnumber them, so its size stays within twice the calls outstanding (plus a
// constant) whatever the deadlines are.
//
// Threading: none (the endpoint's loop thread owns it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "rmsg/loop_time.h"
#include "rpc/vocabulary.h"
#include "wire/rpc_wire.h"

namespace rmsg::rpc {

// The budget of a request sent at `now` for `deadline` (after `now`): microseconds
// rounded up (a call with any time left never arrives with a zero budget), kNoBudget for
// time_point::max() or a difference the clock cannot represent.
inline std::uint64_t budget_for(Clock::time_point deadline, Clock::time_point now) noexcept {
  if (deadline == Clock::time_point::max()) return kNoBudget;
  Duration::rep left = 0;
  if (__builtin_sub_overflow(deadline.time_since_epoch().count(), now.time_since_epoch().count(),
                             &left)) {
    return kNoBudget;
  }
  const auto us = std::chrono::ceil<std::chrono::microseconds>(Duration(left)).count();
  return us < 1 ? 1 : static_cast<std::uint64_t>(us);
}

// The deadline of a request read at `rx` with `budget_us`: time_point::max() for
// kNoBudget and for any budget that would pass it.
inline Clock::time_point deadline_for(Clock::time_point rx, std::uint64_t budget_us) noexcept {
  using Rep = Duration::rep;
  constexpr Rep kPerUs = std::chrono::duration_cast<Duration>(std::chrono::microseconds(1)).count();
  const Rep from = std::max<Rep>(rx.time_since_epoch().count(), 0);
  const auto limit = static_cast<std::uint64_t>((std::numeric_limits<Rep>::max() - from) / kPerUs);
  if (budget_us == kNoBudget || budget_us >= limit) return Clock::time_point::max();
  return rx + std::chrono::microseconds(static_cast<std::chrono::microseconds::rep>(budget_us));
}

class DeadlineQueue {
 public:
  struct Entry {
    Clock::time_point deadline;
    std::uint64_t id = 0;
  };

  // Adds a call's deadline; `live` is the number of calls outstanding after this one, and
  // `for_each_live` lists them (deadline, id) when the queue rebuilds.
  template <typename ForEachLive>
  void push(Entry e, std::size_t live, ForEachLive&& for_each_live) {
    if (heap_.size() >= 2 * live + kSlack) {
      heap_.clear();
      for_each_live([this](Entry x) { heap_.push_back(x); });
      std::make_heap(heap_.begin(), heap_.end(), later);
      return;  // the new call is among the live ones
    }
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  // The earliest deadline queued (stale entries included), or max() when empty.
  Clock::time_point next() const noexcept {
    return heap_.empty() ? Clock::time_point::max() : heap_.front().deadline;
  }

  // Removes and returns the entries due at `now`, earliest first; the caller skips those
  // whose call is gone or has another deadline.
  std::vector<Entry> pop_due(Clock::time_point now) {
    std::vector<Entry> due;
    while (!heap_.empty() && heap_.front().deadline <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      due.push_back(heap_.back());
      heap_.pop_back();
    }
    return due;
  }

  std::size_t size() const noexcept { return heap_.size(); }

 private:
  static constexpr std::size_t kSlack = 64;
  static bool later(const Entry& a, const Entry& b) noexcept { return a.deadline > b.deadline; }
  std::vector<Entry> heap_;
};

}  // namespace rmsg::rpc
