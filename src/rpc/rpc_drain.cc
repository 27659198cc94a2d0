// RpcEndpoint::Impl's graceful shutdown (include/rmsg/rpc.h, Flow control): refuse new
// calls, give outstanding calls and pending responders until the deadline, fail what is
// left with shutting_down; then (RpcEndpoint::Front::drain, once every shard is through)
// the owned messenger drains.
#include <utility>

#include "rpc/rpc_impl.h"

namespace rmsg {

void RpcEndpoint::Impl::drain(Clock::time_point deadline, std::function<void()> done) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed()) return;  // the endpoint is going: `done` is not run
  if (draining_) return defer_done(std::move(done));
  shut_ = true;
  flush_backlog(0, true);  // waiting requests are answered shutting_down now
  answer_waiting();        // and those behind held replies (their answers queue behind)
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

// Held replies (rpc_replies.cc) count as owed: the drain waits for them to be queued, so
// that the messenger's drain sends them.
void RpcEndpoint::Impl::check_drained_slow() {
  if (drain_check_queued_ || !calls_.empty() || !pending_.empty() || replies_held()) return;
  drain_check_queued_ = true;
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.defer([weak] {
    auto self = weak.lock();
    if (!self) return;
    self->drain_check_queued_ = false;
    if (self->calls_.empty() && self->pending_.empty() && !self->replies_held()) {
      self->finish_drain();
    }
  });
}

void RpcEndpoint::Impl::finish_drain() {
  if (!draining_) return;
  draining_ = false;
  if (drain_timer_ != 0) loop_.cancel_timer(drain_timer_);
  drain_timer_ = 0;
  calls_failed_ = true;
  fail_calls(0, make_error_code(RpcErrc::shutting_down));
  counters_.counter("rpc.drain_left_pending").add(pending_.size());
  defer_done(std::move(drain_done_));
}

// The Front's countdown: after every shard, the owned messenger drains (rpc_front.cc).
// Not once the endpoint went (close()): the messenger may be gone.
void RpcEndpoint::Impl::defer_done(std::function<void()> done) {
  if (!done) return;
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.defer([weak, done = std::move(done)] {
    auto self = weak.lock();
    if (self && !self->closed()) done();
  });
}

}  // namespace rmsg
