// What other threads hand to a shard (docs/messenger.md, RPC; include/rmsg/rpc.h,
// Threading): call() checked and numbered at once, sent through the messenger's
// cross-thread path (its bounds answer synchronously), outstanding on the loop once its
// request is queued there; a retry_of call handed over whole (only the loop knows its
// id's call); cancel() and responders' answers posted.
#include <chrono>
#include <utility>
#include <vector>

#include "rpc/rpc_impl.h"

namespace rmsg {

std::error_code RpcEndpoint::Impl::refuse_call(NodeId peer, std::size_t body_size,
                                               const CallOptions& options, const CallCallback& done,
                                               Clock::time_point now) const {
  if (shut_) return make_error_code(RpcErrc::shutting_down);
  if (peer == 0 || peer == options_.messenger.node_id || !done ||
      options.deadline == Clock::time_point{}) {
    return make_error_code(Errc::invalid_argument);
  }
  if (body_size > options_.messenger.max_message_size - rpc::RpcHeader::kSize) {
    return make_error_code(RpcErrc::too_large);
  }
  if (options.deadline <= now) return make_error_code(RpcErrc::timeout);
  return {};
}

bool RpcEndpoint::Impl::take_slot() noexcept {
  if (outstanding_.fetch_add(1, std::memory_order_relaxed) + 1 > options_.max_outstanding) {
    outstanding_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

Result<CallId> RpcEndpoint::Impl::call_any_thread(NodeId peer, std::uint32_t method,
                                                  std::span<const std::byte> body,
                                                  const CallOptions& options, CallCallback done) {
  if (options.retry_of != 0) return retry_any_thread(peer, method, body, options, std::move(done));
  const auto now = loop_.now();
  if (auto e = refuse_call(peer, body.size(), options, done, now)) return e;
  if (!take_slot()) return make_error_code(Errc::resource_exhausted);
  const CallId id = next_id_.fetch_add(id_stride_, std::memory_order_relaxed);
  rpc::RpcHeader h;
  h.kind = rpc::RpcKind::request;
  h.word = method;
  h.id = id;
  h.budget_us = rpc::budget_for(options.deadline, now);
  std::weak_ptr<Impl> weak = weak_from_this();
  const Clock::time_point deadline = options.deadline;
  // Outstanding from now on for cancel() (before the loop may adopt it, or a cancel come).
  call_states_.add(id);
  auto r = port_.send_tracked(peer, rpc::encode_rpc(h, body),
                              lane_for(rpc::RpcHeader::kSize + body.size()),
                              [weak, id, peer, now, deadline, done](Messenger::Ticket t) {
                                if (auto self = weak.lock())
                                  self->adopt(id, peer, t, now, deadline, done);
                              });
  if (!r) {
    call_states_.remove(id);
    --outstanding_;
    return r.error();
  }
  return id;
}

void RpcEndpoint::Impl::adopt(CallId id, NodeId peer, Messenger::Ticket ticket,
                              Clock::time_point start, Clock::time_point deadline,
                              CallCallback done) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  Call c;
  c.peer = peer;
  c.ticket = ticket;
  c.start = start;
  c.deadline = deadline;
  c.done = std::move(done);
  insert_call(id, std::move(c));
  // Its calls failed meanwhile (shutdown(), a drain that ended, close()): so does this one
  // (its request is withdrawn). During a drain it is drained like the others.
  if (calls_failed_) {
    if (!closed()) port_.withdraw(peer, ticket);
    RpcResponse r;
    r.error = make_error_code(RpcErrc::shutting_down);
    complete(id, std::move(r));  // completes cancelled instead if a cancel claimed it
    return;
  }
  // Cancelled (claimed) before it got here: now its request can be withdrawn.
  if (call_states_.claimed(id)) cancel_now(calls_.find(id));
}

Result<CallId> RpcEndpoint::Impl::retry_any_thread(NodeId peer, std::uint32_t method,
                                                   std::span<const std::byte> body,
                                                   const CallOptions& options, CallCallback done) {
  const auto start = loop_.now();
  if (auto e = refuse_call(peer, body.size(), options, done, start)) return e;
  // The id must be one of this shard's: a retry goes to the peer of the call it retries.
  if (!mine(options.retry_of)) return make_error_code(Errc::invalid_argument);
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.post([weak, peer, method, b = std::vector<std::byte>(body.begin(), body.end()), options,
              start, done = std::move(done)] {
    auto self = weak.lock();
    if (!self) return;
    // The loop's own path; what it refuses (the id still outstanding, max_outstanding, a
    // queue bound, a shutdown meanwhile) completes the call instead.
    auto r = self->call(peer, method, b, options, done);
    if (r) return;
    RpcResponse failed;
    failed.id = options.retry_of;
    failed.error = r.error();
    failed.latency = self->loop_.now() - start;
    done(std::move(failed));
  });
  return options.retry_of;
}

bool RpcEndpoint::Impl::cancel_any_thread(CallId id) {
  // The claim decides: from now on the call can only complete cancelled (complete()).
  if (!mine(id) || !call_states_.claim(id)) return false;
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.post([weak, id] {
    auto self = weak.lock();
    // Completed meanwhile (as cancelled), or not adopted yet (adopt() cancels it then).
    if (!self || !self->call_states_.claimed(id)) return;
    if (auto it = self->calls_.find(id); it != self->calls_.end()) self->cancel_now(it);
  });
  return true;
}

void RpcEndpoint::Impl::answer(std::shared_ptr<RpcResponder::State> state, rpc::RpcStatus status,
                               std::uint32_t code, std::span<const std::byte> body) {
  if (loop::Access::owned_here(loop_)) {
    finish(*state, status, code, body);
    return recycle(std::move(state));
  }
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.post([weak, state = std::move(state), status, code,
              b = std::vector<std::byte>(body.begin(), body.end())] {
    if (auto self = weak.lock()) self->finish(*state, status, code, b);
  });
}

}  // namespace rmsg
