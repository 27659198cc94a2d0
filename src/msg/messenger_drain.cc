// Messenger::Impl's graceful shutdown (docs/messenger.md, Flow control): refuse new sends,
// wait until every queue is acknowledged or the deadline passes, then close every
// connection with a close frame and call done(). And the receiving side's pause.
#include <algorithm>
#include <memory>
#include <utility>

#include "msg/front_sync.h"
#include "msg/messenger_front.h"
#include "msg/messenger_impl.h"

namespace rmsg {

void Messenger::Impl::drain(Clock::time_point deadline, std::function<void()> done) {
  if (shutting_down_ || drainer_.draining()) {
    // Already closed or closing: done() still runs once, after the loop's next turn.
    if (done) loop_.defer(std::move(done));
    return;
  }
  drain_done_ = std::move(done);
  drainer_.start(
      weak_from_this(), deadline,
      [this] {
        return std::all_of(sessions_.begin(), sessions_.end(),
                           [](const auto& e) { return e.second->out().size() == 0; });
      },
      [this] {
        std::function<void()> finished = std::move(drain_done_);
        shutdown();
        if (finished) finished();
      });
}

void Messenger::Impl::set_paused(NodeId peer, bool paused) {
  Session* s = find_session(peer);
  if (s == nullptr || s->paused == paused) return;
  s->paused = paused;
  paused_sessions_ = paused ? paused_sessions_ + 1 : paused_sessions_ - 1;
  counters_.counter(paused ? "msg.read_pauses" : "msg.read_resumes").add_owned();
  if (paused || s->conn() == 0) return;
  // Resume: what was stashed, then the stream (its readiness may have fired meanwhile).
  if (Connection* c = find_connection(s->conn())) watch(*c);
  std::weak_ptr<Impl> weak = weak_from_this();
  const ConnId id = s->conn();
  loop_.defer([weak, id] {
    if (auto self = weak.lock()) self->on_readable(id);
  });
}

void Messenger::Front::drain(Clock::time_point deadline, std::function<void()> done) {
  draining_.store(true, std::memory_order_release);
  // Every shard drains on its own loop; the last one to finish runs done (on its loop).
  auto one_drained = msg::after_all(shards_.size(), std::move(done));
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    run_on(i, [deadline, one_drained](Impl& s, msg::ServiceTable&) {
      s.drain(deadline, one_drained);
    });
  }
}

}  // namespace rmsg
