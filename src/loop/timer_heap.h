// TimerHeap: the loop's pending timers, ordered by deadline (then by insertion), on
// whatever clock the loop reads; the caller passes "now" in. Cancel is O(1): cancelled
// timers leave stale heap entries that are skipped, and the heap is rebuilt when they
// outnumber the live ones. Loop-thread-only, like the loop.
#pragma once

#include <cstdint>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include "rmsg/event_loop.h"

namespace rmsg::loop {

class TimerHeap {
 public:
  // Adds a timer under the caller's id (unique among live timers); period 0 = one-shot.
  void add(TimerId id, Clock::time_point deadline, Duration period, Task task);
  // True if the timer was pending.
  bool cancel(TimerId id);
  // The earliest live deadline; time_point::max() when there is none. Inline: an idle
  // poll asks on every iteration.
  Clock::time_point next() {
    if (heap_.empty()) return Clock::time_point::max();
    if (!top_live_) drop_stale_top();
    return heap_.empty() ? Clock::time_point::max() : heap_.top().deadline;
  }
  // Takes the earliest timer due at `now` (deadline <= now) and returns its task, or null
  // when none is due. A periodic timer is rescheduled to now + period first (no catch-up),
  // so that its task may cancel it.
  std::shared_ptr<Task> pop_due(Clock::time_point now);

 private:
  struct Timer {
    Clock::time_point deadline;
    Duration period;  // zero for one-shot
    std::uint64_t seq;
    std::shared_ptr<Task> task;
  };
  struct Entry {
    Clock::time_point deadline;
    std::uint64_t seq;  // tie-break: insertion order; also detects stale entries
    TimerId id;
    bool operator>(const Entry& o) const {
      return deadline != o.deadline ? deadline > o.deadline : seq > o.seq;
    }
  };

  void drop_stale_top();
  void compact();

  std::unordered_map<TimerId, Timer> timers_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
  std::uint64_t seq_ = 0;
  // The top entry is known to be a live timer's: drop_stale_top() found it so, or add()
  // put a new one there. Only cancel(), pop_due() and compact() can make the top stale or
  // put an unchecked entry there; until then next() costs no look-up (it runs several
  // times per loop iteration).
  bool top_live_ = false;
};

}  // namespace rmsg::loop
