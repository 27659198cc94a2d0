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
  if (drainer_.draining()) return defer_done(std::move(done));
  shut_ = true;
  flush_backlog(0, true);  // waiting requests are answered shutting_down now
  answer_waiting();        // and those behind held replies (their answers queue behind)
  drain_done_ = std::move(done);
  // Held replies (rpc_replies.cc) count as owed: the drain waits for them to be queued, so
  // that the messenger's drain sends them.
  drainer_.start(
      weak_from_this(), deadline,
      [this] { return calls_.empty() && pending_.empty() && !replies_held(); },
      [this] {
        calls_failed_ = true;
        fail_calls(0, make_error_code(RpcErrc::shutting_down));
        counters_.counter("rpc.drain_left_pending").add(pending_.size());
        defer_done(std::move(drain_done_));
      });
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
