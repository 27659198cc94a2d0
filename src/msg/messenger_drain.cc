// Messenger::Impl's graceful shutdown (docs/messenger.md, Flow control): refuse new sends,
// wait until every queue is acknowledged or the deadline passes, then close every
// connection with a close frame and call done(). And the receiving side's pause.
#include <memory>
#include <utility>

#include "msg/front_sync.h"
#include "msg/messenger_front.h"
#include "msg/messenger_impl.h"

namespace rmsg {

void Messenger::Impl::drain(Clock::time_point deadline, std::function<void()> done) {
  if (shutting_down_ || draining_) {
    // Already closed or closing: done() still runs once, after the loop's next turn.
    if (done) loop_.defer(std::move(done));
    return;
  }
  draining_ = true;
  drain_done_ = std::move(done);
  std::weak_ptr<Impl> weak = weak_from_this();
  Duration left = deadline - loop_.now();
  if (left < Duration::zero()) left = Duration::zero();
  drain_timer_ = loop_.add_timer(left, [weak] {
    if (auto self = weak.lock()) {
      self->drain_timer_ = 0;
      self->finish_drain();
    }
  });
  check_drained();
}

void Messenger::Impl::check_drained_slow() {
  if (drain_check_queued_) return;
  for (const auto& [peer, s] : sessions_) {
    if (s->out->size() > 0) return;
  }
  // Not inside the frame handler (or send) that emptied the last queue.
  drain_check_queued_ = true;
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.defer([weak] {
    auto self = weak.lock();
    if (!self) return;
    self->drain_check_queued_ = false;
    for (const auto& [peer, s] : self->sessions_) {
      if (s->out->size() > 0) return;
    }
    self->finish_drain();
  });
}

void Messenger::Impl::finish_drain() {
  if (!draining_) return;
  draining_ = false;
  if (drain_timer_ != 0) loop_.cancel_timer(drain_timer_);
  drain_timer_ = 0;
  std::function<void()> done = std::move(drain_done_);
  shutdown();
  if (done) done();
}

void Messenger::Impl::set_paused(NodeId peer, bool paused) {
  Session* s = find_session(peer);
  if (s == nullptr || s->paused == paused) return;
  s->paused = paused;
  paused_sessions_ = paused ? paused_sessions_ + 1 : paused_sessions_ - 1;
  counters_.counter(paused ? "msg.read_pauses" : "msg.read_resumes").add_owned();
  if (paused || s->conn == 0) return;
  // Resume: what was stashed, then the stream (its readiness may have fired meanwhile).
  if (Connection* c = find_connection(s->conn)) watch(*c);
  std::weak_ptr<Impl> weak = weak_from_this();
  const ConnId id = s->conn;
  loop_.defer([weak, id] {
    if (auto self = weak.lock()) self->on_readable(id);
  });
}

void Messenger::Front::drain(Clock::time_point deadline, std::function<void()> done) {
  draining_.store(true, std::memory_order_release);
  // Every shard drains on its own loop; the last one to finish runs done (on its loop).
  auto one_drained = msg::after_all(shards_.size(), std::move(done));
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    run_on(i, [deadline, one_drained](Shard& s) { s.impl->drain(deadline, one_drained); });
  }
}

}  // namespace rmsg
