// RpcEndpoint::call() and notify() from threads other than the endpoint's loop: checked
// and numbered at once, sent through the messenger's cross-thread path (its bounds answer
// synchronously), and the call becomes outstanding on the loop once its request is queued
// there (docs/messenger.md, RPC; include/rmsg/rpc.h, Threading).
#include <chrono>
#include <utility>

#include "msg/messenger_front.h"
#include "msg/rpc_impl.h"

namespace rmsg {

bool RpcEndpoint::Impl::take_slot() noexcept {
  if (outstanding_.fetch_add(1, std::memory_order_relaxed) + 1 > options_.max_outstanding) {
    outstanding_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

Result<CallId> RpcEndpoint::Impl::call_afar(NodeId peer, std::uint32_t method,
                                            std::span<const std::byte> body,
                                            const CallOptions& options, CallCallback done) {
  if (shut_) return make_error_code(RpcErrc::shutting_down);
  // A retry names a finished call of this endpoint, which only its loop can tell.
  if (peer == 0 || peer == options_.messenger.node_id || !done ||
      options.deadline == Clock::time_point{} || options.retry_of != 0) {
    return make_error_code(Errc::invalid_argument);
  }
  if (body.size() > options_.messenger.max_message_size - msg::RpcHeader::kSize) {
    return make_error_code(RpcErrc::too_large);
  }
  const auto now = loop_.now();
  if (options.deadline <= now) return make_error_code(RpcErrc::timeout);
  if (!take_slot()) return make_error_code(Errc::resource_exhausted);
  const CallId id = next_id_.fetch_add(1, std::memory_order_relaxed);
  msg::RpcHeader h;
  h.kind = msg::RpcKind::request;
  h.word = method;
  h.id = id;
  h.budget_us = static_cast<std::uint64_t>(std::max<std::int64_t>(
      1, std::chrono::ceil<std::chrono::microseconds>(options.deadline - now).count()));
  std::weak_ptr<Impl> weak = weak_from_this();
  const Clock::time_point deadline = options.deadline;
  auto r = MessengerAccess::front(*messenger_)
               .send_tracked(peer, msg::encode_rpc(h, body),
                             lane_for(msg::RpcHeader::kSize + body.size()),
                             [weak, id, peer, now, deadline, done](Messenger::Ticket t) {
                               if (auto self = weak.lock())
                                 self->adopt(id, peer, t, now, deadline, done);
                             });
  if (!r) {
    --outstanding_;
    return r.error();
  }
  return id;
}

void RpcEndpoint::Impl::adopt(CallId id, NodeId peer, Messenger::Ticket ticket,
                              Clock::time_point start, Clock::time_point deadline,
                              CallCallback done) {
  Call c;
  c.peer = peer;
  c.ticket = ticket;
  c.start = start;
  c.deadline = deadline;
  c.done = std::move(done);
  calls_.emplace(id, std::move(c));
  deadlines_.push({deadline, id}, calls_.size(), [this](auto add) {
    for (const auto& [cid, call] : calls_) add({call.deadline, cid});
  });
  arm_deadline_timer();
  PeerCounters& pc = peer_counters(peer);
  pc.calls->add_owned();
  ++pc.outstanding;
  // Shut down meanwhile: the call fails like the others did (its request is withdrawn).
  if (shut_) {
    if (messenger_ != nullptr) messenger_->withdraw(peer, ticket);
    RpcResponse r;
    r.error = make_error_code(RpcErrc::shutting_down);
    complete(id, std::move(r));
  }
}

}  // namespace rmsg
