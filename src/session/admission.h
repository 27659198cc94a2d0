// Admission: the messenger's queue bounds as atomic budgets, so that a send from any
// thread gets its verdict (queued or Errc::resource_exhausted) synchronously, before the
// message is handed to the loop that owns the peer's session (docs/messenger.md,
// Threading). One per messenger, shared by every shard (loop): the messenger-wide total
// and one budget per peer node, which every OutQueue of that peer's sessions charges (a
// session reset keeps the peer's budget; its new queue starts empty).
//
// A peer's budget is forgotten with its last session (forget(), when nothing is charged to
// it), so peers that come and go leave nothing behind. A reservation from a foreign thread
// is made under the mutex, so it never lands in a budget being forgotten: either it comes
// first (the budget is charged, so it stays) or it makes a new one.
//
// Threading: any thread. session(), try_reserve(), release() and forget() take a mutex (once
// per send from a foreign thread, once per session made on a loop); the budgets themselves
// are lock-free. A budget returned by session() lives until forget() of its peer, which only
// the loop owning the peer calls, once that peer's session is gone.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "session/out_queue.h"

namespace rmsg::session {

class Admission {
 public:
  Admission(const QueueLimits& session_limits, std::size_t total_messages,
            std::size_t total_bytes) noexcept
      : session_limits_(session_limits), total_{total_messages, total_bytes} {}
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;
  Admission(Admission&&) = delete;
  Admission& operator=(Admission&&) = delete;
  ~Admission() = default;

  QueueBudget& total() noexcept { return total_; }
  // The budget of `peer` (made on first use; it lives until forget(peer)).
  QueueBudget& session(std::uint64_t peer) {
    const std::lock_guard lock(mu_);
    return budget(peer);
  }
  // Drops `peer`'s budget if nothing is charged to it and no refusal episode is open (its
  // sessions are gone). The owner's loop only.
  void forget(std::uint64_t peer) {
    const std::lock_guard lock(mu_);
    auto it = sessions_.find(peer);
    if (it == sessions_.end()) return;
    if (it->second->used.load(std::memory_order_relaxed) != 0 ||
        it->second->refused.load(std::memory_order_acquire)) {
      return;
    }
    sessions_.erase(it);
  }
  // Sessions of every shard (MessengerOptions::max_sessions is messenger-wide).
  std::atomic<std::size_t> live_sessions{0};
  // Reserves one message of n bytes in `peer`'s budget and the total; false (nothing
  // reserved; a refusal episode starts, as for OutQueue::push) when either is full, with
  // *episode_started (when given) true for the refusal that started the episode.
  // OutQueue::push_reserved takes it over.
  bool try_reserve(std::uint64_t peer, std::size_t n, bool* episode_started = nullptr) {
    const std::lock_guard lock(mu_);
    QueueBudget& s = budget(peer);
    if (!s.try_reserve(n)) {
      const bool started = note_refused(s, total_);
      if (episode_started != nullptr) *episode_started = started;
      return false;
    }
    if (total_.try_reserve(n)) return true;
    s.release(1, n);
    const bool started = note_refused(s, total_);
    if (episode_started != nullptr) *episode_started = started;
    return false;
  }
  // Gives back a reservation that was never pushed (the shard went away first).
  void release(std::uint64_t peer, std::size_t n) {
    const std::lock_guard lock(mu_);
    budget(peer).release(1, n);
    total_.release(1, n);
  }

 private:
  QueueBudget& budget(std::uint64_t peer) {  // under mu_
    auto& b = sessions_[peer];
    if (!b) {
      b = std::make_unique<QueueBudget>(session_limits_.max_messages, session_limits_.max_bytes);
    }
    return *b;
  }

  QueueLimits session_limits_;
  QueueBudget total_;
  std::mutex mu_;
  std::unordered_map<std::uint64_t, std::unique_ptr<QueueBudget>> sessions_;
};

}  // namespace rmsg::session
