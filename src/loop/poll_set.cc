// PollSet: see poll_set.h.
#include "loop/poll_set.h"

#include <sched.h>

namespace rmsg::loop {

PollSet::PollSet(CounterSet& counters, bool yield)
    : yield_(yield),
      spins_(counters.counter("loop.spins")),
      spin_polls_(counters.counter("loop.spin_polls")),
      arms_(counters.counter("loop.arms")),
      yields_(counters.counter("loop.yields")) {}

void PollSet::add(std::uint64_t id, std::function<bool()> poll, std::function<bool()> arm) {
  pollers_.emplace(id, std::make_shared<Poller>(Poller{std::move(poll), std::move(arm)}));
  snapshot_valid_ = false;
}

void PollSet::remove(std::uint64_t id) {
  auto it = pollers_.find(id);
  if (it == pollers_.end()) return;
  it->second->removed = true;
  pollers_.erase(it);
  snapshot_valid_ = false;
}

void PollSet::rebuild_snapshot() {
  snapshot_.clear();
  for (const auto& entry : pollers_) snapshot_.push_back(entry.second);
  snapshot_valid_ = true;
}

int PollSet::arm_all() {
  const auto& pollers = snapshot();
  int found = 0;
  for (std::size_t i = 0, n = pollers.size(); i < n; ++i) {
    Poller* const p = pollers[i].get();  // alive through the pass: see poll_all
    if (p->removed || !p->arm || !p->arm()) continue;
    arms_.add_owned();
    if (!p->removed && p->poll()) ++found;
  }
  return found;
}

int PollSet::spin(Clock::time_point limit, const std::atomic<bool>& interrupt) {
  spins_.add_owned();
  for (std::uint32_t pass = 1;; ++pass) {
    spin_polls_.add_owned();
    if (const int found = poll_all(); found > 0) return found;
    if (interrupt.load(std::memory_order_acquire)) return 0;
    if (pass % kCheckEvery != 0) continue;
    if (Clock::now() >= limit) return 0;
    if (yield_) {
      ::sched_yield();
      yields_.add_owned();
    }
  }
}

}  // namespace rmsg::loop
