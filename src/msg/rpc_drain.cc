// RpcEndpoint::Impl's graceful shutdown (include/rmsg/rpc.h, Flow control): refuse new
// calls, give outstanding calls and pending responders until the deadline, fail what is
// left with shutting_down, then drain the messenger.
#include <utility>

#include "msg/rpc_impl.h"

namespace rmsg {

void RpcEndpoint::Impl::drain(Clock::time_point deadline, std::function<void()> done) {
  if (draining_ || messenger_ == nullptr) {
    if (done) loop_.defer(std::move(done));
    return;
  }
  shut_ = true;
  draining_ = true;
  drain_deadline_ = deadline;
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

void RpcEndpoint::Impl::check_drained() {
  if (!draining_ || drain_check_queued_ || !calls_.empty() || !pending_.empty()) return;
  drain_check_queued_ = true;
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.defer([weak] {
    auto self = weak.lock();
    if (!self) return;
    self->drain_check_queued_ = false;
    if (self->calls_.empty() && self->pending_.empty()) self->finish_drain();
  });
}

void RpcEndpoint::Impl::finish_drain() {
  if (!draining_) return;
  draining_ = false;
  if (drain_timer_ != 0) loop_.cancel_timer(drain_timer_);
  drain_timer_ = 0;
  fail_calls(0, make_error_code(RpcErrc::shutting_down));
  counters_.counter("rpc.drain_left_pending").add_owned(pending_.size());
  std::function<void()> done = std::move(drain_done_);
  // The messenger sends what is queued (replies included) until the same deadline; one
  // shared with other users (services) is theirs to shut down.
  if (!owned_) {
    if (done) loop_.defer(std::move(done));
    return;
  }
  messenger_->shutdown(drain_deadline_, std::move(done));
}

}  // namespace rmsg
