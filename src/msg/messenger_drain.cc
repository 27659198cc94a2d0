// Messenger::Impl's graceful shutdown (docs/messenger.md, Flow control): refuse new sends,
// wait until every queue is acknowledged or the deadline passes, then close every
// connection with a close frame and call done().
#include <utility>

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

void Messenger::Impl::check_drained() {
  if (!draining_ || drain_check_queued_) return;
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

Result<Messenger::Ticket> MessengerAccess::send_while_draining(Messenger& m, NodeId peer,
                                                               std::vector<std::byte> payload,
                                                               const Messenger::SendOptions& o) {
  return m.impl_->send_tracked(peer, std::move(payload), o, true);
}

}  // namespace rmsg
