// The serving side: requests to handlers (with the checks that refuse them unrun: unknown
// method, too large, budget gone, shutting down, a deduplicated retry), responders,
// cancel messages, one-way messages.
#include <chrono>
#include <utility>

#include "msg/rpc_impl.h"

namespace rmsg {

void RpcEndpoint::Impl::on_request(NodeId from, const msg::RpcHeader& h,
                                   std::span<const std::byte> body) {
  const msg::DedupeTable::Key key{from, h.id};
  if (shut_) return send_reply(from, h.id, msg::RpcStatus::shutting_down, 0, {}, false);
  if (h.budget_us == 0) {
    counters_.counter("rpc.server.expired").add();
    return send_reply(from, h.id, msg::RpcStatus::timeout, 0, {}, false);
  }
  auto m = methods_.find(h.word);
  if (m == methods_.end()) {
    counters_.counter("rpc.server.unknown_method").add();
    return send_reply(from, h.id, msg::RpcStatus::unknown_method, 0, {}, false);
  }
  if (body.size() > options_.max_request_size) {
    counters_.counter("rpc.server.too_large").add();
    return send_reply(from, h.id, msg::RpcStatus::too_large, 0, {}, false);
  }
  const bool dedupe = m->second.options.dedupe;
  if (dedupe) {
    if (const auto* stored = dedupe_.find(key)) {
      counters_.counter("rpc.server.dedupe_hits").add();
      if (!MessengerAccess::send_while_draining(*messenger_, from, std::vector<std::byte>(*stored),
                                                lane_for(stored->size()))) {
        counters_.counter("rpc.reply_not_sent").add();
      }
      return;
    }
    if (pending_.contains(key)) {
      // Still running: its reply will answer this retry too (same id).
      counters_.counter("rpc.server.dedupe_pending").add();
      return;
    }
  }
  auto state = std::make_shared<RpcResponder::State>();
  state->endpoint = weak_from_this();
  state->peer = from;
  state->id = h.id;
  state->dedupe = dedupe;
  pending_[key] = state;
  count_pending(from, +1);
  RpcRequest req;
  req.from = from;
  req.id = h.id;
  req.method = h.word;
  req.body = body;
  if (h.budget_us != msg::kNoBudget) {
    req.deadline = loop_.now() + std::chrono::microseconds(h.budget_us);
  }
  peer_counters(from).served->add_owned();
  // Copy the handler: it may replace itself (handle()) while it runs.
  Handler handler = m->second.handler;
  handler(req, RpcResponder(std::move(state)));
}

void RpcEndpoint::Impl::on_cancel(NodeId from, CallId id) {
  auto it = pending_.find({from, id});
  if (it == pending_.end()) return;
  if (auto st = it->second.lock()) st->cancelled = true;
  counters_.counter("rpc.server.cancelled").add();
}

void RpcEndpoint::Impl::on_oneway(NodeId from, const msg::RpcHeader& h,
                                  std::span<const std::byte> body) {
  auto it = oneway_.find(h.word);
  if (it == oneway_.end()) {
    counters_.counter("rpc.server.unknown_oneway").add();
    return;
  }
  peer_counters(from).oneway_received->add_owned();
  RpcRequest req;
  req.from = from;
  req.method = h.word;
  req.body = body;
  OnewayHandler handler = it->second;
  handler(req);
}

void RpcEndpoint::Impl::finish(RpcResponder::State& state, msg::RpcStatus status,
                               std::uint32_t code, std::span<const std::byte> body) {
  if (closed()) return;  // the endpoint went: the reply is dropped
  // Only this state's own entry: after a reset a new request may hold the same key.
  if (auto it = pending_.find({state.peer, state.id});
      it != pending_.end() && it->second.lock().get() == &state) {
    pending_.erase(it);
    count_pending(state.peer, -1);
    check_drained();
  }
  if (state.cancelled) {
    counters_.counter("rpc.server.reply_dropped").add();
    return;
  }
  send_reply(state.peer, state.id, status, code, body, state.dedupe);
}

void RpcEndpoint::Impl::count_pending(NodeId peer, int delta) {
  PeerCounters& pc = peer_counters(peer);
  pc.pending = delta > 0 ? pc.pending + 1 : pc.pending - 1;
  const std::size_t max = options_.max_pending_requests;
  const bool pause = max != 0 && pc.pending >= max;
  if (pause == pc.paused || messenger_ == nullptr) return;
  pc.paused = pause;
  if (pause) counters_.counter("rpc.server.read_paused").add();
  MessengerAccess::set_paused(*messenger_, peer, pause);
}

void RpcEndpoint::Impl::send_reply(NodeId to, CallId id, msg::RpcStatus status, std::uint32_t code,
                                   std::span<const std::byte> body, bool dedupe) {
  msg::RpcHeader h;
  h.kind = msg::RpcKind::reply;
  h.status = status;
  h.word = code;
  h.id = id;
  auto bytes = msg::encode_rpc(h, body);
  if (dedupe) dedupe_.put({to, id}, bytes);
  const auto lane = lane_for(bytes.size());
  // Replies go out during the messenger's drain too (a request that arrives meanwhile is
  // answered shutting_down rather than left to its caller's deadline).
  if (!MessengerAccess::send_while_draining(*messenger_, to, std::move(bytes), lane)) {
    counters_.counter("rpc.reply_not_sent").add();
  }
}

RpcResponder& RpcResponder::operator=(RpcResponder&& other) noexcept {
  if (this != &other) {
    if (state_) error(0);
    state_ = std::move(other.state_);
  }
  return *this;
}

RpcResponder::~RpcResponder() {
  if (state_) error(0);
}

void RpcResponder::ok(std::span<const std::byte> body) {
  auto st = std::move(state_);
  if (!st) return;
  if (auto ep = st->endpoint.lock()) ep->answer(std::move(st), msg::RpcStatus::ok, 0, body);
}

void RpcResponder::error(std::uint32_t app_code, std::span<const std::byte> body) {
  auto st = std::move(state_);
  if (!st) return;
  if (auto ep = st->endpoint.lock()) {
    ep->answer(std::move(st), msg::RpcStatus::handler_error, app_code, body);
  }
}

bool RpcResponder::cancelled() const noexcept {
  return state_ != nullptr && state_->cancelled;
}

}  // namespace rmsg
