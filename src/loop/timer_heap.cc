#include "loop/timer_heap.h"

namespace rmsg::loop {

void TimerHeap::add(TimerId id, Clock::time_point deadline, Duration period, Task task) {
  const auto seq = ++seq_;
  timers_.emplace(id, Timer{deadline, period, seq, std::make_shared<Task>(std::move(task))});
  heap_.push({deadline, seq, id});
  if (heap_.top().seq == seq) top_live_ = true;
}

bool TimerHeap::cancel(TimerId id) {
  if (timers_.erase(id) == 0) return false;
  top_live_ = false;
  compact();
  return true;
}

std::shared_ptr<Task> TimerHeap::pop_due(Clock::time_point now) {
  top_live_ = false;
  while (!heap_.empty() && heap_.top().deadline <= now) {
    const Entry top = heap_.top();
    heap_.pop();
    auto it = timers_.find(top.id);
    if (it == timers_.end() || it->second.seq != top.seq) continue;  // cancelled / stale
    auto task = it->second.task;  // keeps the callable alive if it cancels itself
    if (it->second.period > Duration::zero()) {
      it->second.deadline = now + it->second.period;
      it->second.seq = ++seq_;
      heap_.push({it->second.deadline, it->second.seq, top.id});
    } else {
      timers_.erase(it);
    }
    return task;
  }
  return nullptr;
}

void TimerHeap::drop_stale_top() {
  while (!heap_.empty()) {
    auto it = timers_.find(heap_.top().id);
    if (it != timers_.end() && it->second.seq == heap_.top().seq) {
      top_live_ = true;
      return;
    }
    heap_.pop();
  }
}

// Rebuilt only when stale entries outnumber the live ones, so that churn cannot grow the
// heap without bound and a rebuild costs O(1) amortized per cancel.
void TimerHeap::compact() {
  if (heap_.size() < 64 || heap_.size() < 2 * timers_.size()) return;
  std::vector<Entry> live;
  live.reserve(timers_.size());
  for (const auto& [id, t] : timers_) live.push_back({t.deadline, t.seq, id});
  heap_ = decltype(heap_)(std::greater<>(), std::move(live));
}

}  // namespace rmsg::loop
