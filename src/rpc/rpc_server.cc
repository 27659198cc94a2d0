// The serving side: requests to handlers (with the checks that refuse them unrun: unknown
// method, too large, budget gone, shutting down, a deduplicated retry), responders,
// cancel messages, one-way messages. Cancels that overtake their request: rpc_cancels.cc;
// the endpoint-wide bound on pending requests: rpc_backlog.cc; replies that wait for room
// in the peer's queue: rpc_replies.cc.
#include <chrono>
#include <utility>

#include "rpc/rpc_impl.h"

namespace rmsg {

void RpcEndpoint::Impl::on_request(NodeId from, const rpc::RpcHeader& h,
                                   std::span<const std::byte> body) {
  PeerCounters& pc = peer_counters(from);
  if (!pc.early_cancels.empty() && cancelled_early(pc, h, body.size())) [[unlikely]] {
    return;
  }
  // Behind replies that wait for room: its handler runs once they are queued.
  if (!pc.held.empty() || !pc.waiting.empty()) [[unlikely]] {
    if (session_of(from) == pc.held_session) return wait_for_replies(from, pc, h, body);
    drop_stale_held(from, pc);
  }
  serve(from, pc, h, body, port_.dispatch_time(), false);
}

bool RpcEndpoint::Impl::serve(NodeId from, PeerCounters& pc, const rpc::RpcHeader& h,
                              std::span<const std::byte> body, Clock::time_point rx, bool has_room,
                              bool waited) {
  const auto refuse = [&](rpc::RpcStatus status) {
    send_reply(from, h.id, status, 0, {}, nullptr);
    return false;
  };
  const rpc::DedupeTable::Key key{from, h.id};
  if (shut_) return refuse(rpc::RpcStatus::shutting_down);
  // A deferred request's budget may have run out while it waited.
  if (h.budget_us == 0 ||
      ((has_room || waited) && rpc::deadline_for(rx, h.budget_us) <= loop_.now())) {
    counters_.counter("rpc.server.expired").add();
    return refuse(rpc::RpcStatus::timeout);
  }
  auto m = methods_.find(h.word);
  if (m == methods_.end() || !m->second) {
    counters_.counter("rpc.server.unknown_method").add();
    return refuse(rpc::RpcStatus::unknown_method);
  }
  if (body.size() > options_.max_request_size) {
    counters_.counter("rpc.server.too_large").add();
    return refuse(rpc::RpcStatus::too_large);
  }
  const Method& method = *m->second;
  const bool dedupe = method.options.dedupe;
  // The session the request came in: a reply is kept for (and a retry answered in) it only.
  const std::uint64_t session = dedupe ? session_of(from) : 0;
  if (dedupe && (h.flags & rpc::kRpcFlagDedupe) != 0) {
    if (const auto* stored = dedupe_.find(key, session, h.word)) {
      counters_.counter("rpc.server.dedupe_hits").add();
      queue_reply(from, std::vector<std::byte>(*stored));
      return false;
    }
    if (auto p = pending_.find(key); p != pending_.end()) {
      const auto st = p->second.weak.lock();
      if (st && st->session == session && st->method == h.word) {
        // Still running: its reply will answer this retry too (same id).
        counters_.counter("rpc.server.dedupe_pending").add();
        return false;
      }
    }
  } else if (dedupe) {
    // A new call: whatever an earlier incarnation of the caller left under its id is not
    // its reply.
    dedupe_.erase(key);
  }
  // The endpoint-wide bound: behind those already waiting, or when there is no room.
  if (bounded() && !has_room && (!backlog_.empty() || !take_room())) [[unlikely]] {
    defer(from, pc, h, body, rx);
    return false;
  }
  std::shared_ptr<RpcResponder::State> state = take_state();
  state->peer = from;
  state->id = h.id;
  state->dedupe = dedupe;
  state->session = session;
  state->method = h.word;
  add_pending(key, state);
  pending_began(from, pc);
  RpcRequest req;
  req.from = from;
  req.id = h.id;
  req.method = h.word;
  req.body = body;
  req.deadline = rpc::deadline_for(rx, h.budget_us);  // from when it was read: no clock read
  pc.served->add_owned();
  // The handler may replace itself (handle()) while it runs: set_method keeps it.
  const Running running(*this);
  method.handler(req, RpcResponder(std::move(state)));
  return true;
}

void RpcEndpoint::Impl::add_pending(const rpc::DedupeTable::Key& key,
                                    const std::shared_ptr<RpcResponder::State>& state) {
  auto it = pending_.lower_bound(key);
  if (it != pending_.end() && it->first == key) {
    // The same id again: the old one no longer counts as pending (its answer will not
    // find its entry), the new one does. The old one's reply is dropped (as cancelled):
    // the caller waits for one reply to this id, the new request's (a retry's, or a new
    // call's of an endpoint re-created on a shared messenger, whose ids start afresh).
    if (auto old = it->second.weak.lock()) old->cancelled = true;
    it->second = Pending{state.get(), state};
    pending_ended(key.first);
    return;
  }
  if (spare_pending_.empty()) {
    pending_.emplace_hint(it, key, Pending{state.get(), state});
    return;
  }
  PendingMap::node_type node = std::move(spare_pending_.back());
  spare_pending_.pop_back();
  node.key() = key;
  node.mapped() = Pending{state.get(), state};
  pending_.insert(it, std::move(node));
}

std::shared_ptr<RpcResponder::State> RpcEndpoint::Impl::take_state() {
  if (spare_states_.empty()) {
    auto state = std::make_shared<RpcResponder::State>();
    state->endpoint = weak_from_this();
    return state;
  }
  std::shared_ptr<RpcResponder::State> state = std::move(spare_states_.back());
  spare_states_.pop_back();
  state->cancelled.store(false, std::memory_order_relaxed);
  return state;
}

void RpcEndpoint::Impl::recycle(std::shared_ptr<RpcResponder::State> state) noexcept {
  // Only a state nobody else holds: its responder gave it up (answer() took it) and
  // finish() cleared its pending_ entry, the one weak reference to it, so no other thread
  // can reach it any more. A closed shard keeps none (close() would not see them go).
  if (closed() || state.use_count() != 1 || spare_states_.size() >= kSpareNodes) return;
  spare_states_.push_back(std::move(state));
}

void RpcEndpoint::Impl::set_method(std::uint32_t method, Method m) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  auto& slot = methods_[method];
  if (slot && handlers_running_ > 0) retired_methods_.push_back(std::move(slot));
  slot = std::make_unique<const Method>(std::move(m));
}

void RpcEndpoint::Impl::set_oneway(std::uint32_t method, OnewayHandler h) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  auto& slot = oneway_[method];
  if (slot && handlers_running_ > 0) retired_oneway_.push_back(std::move(slot));
  slot = std::make_unique<const OnewayHandler>(std::move(h));
}

RpcEndpoint::Impl::Running::~Running() {
  if (--impl_.handlers_running_ != 0) return;
  impl_.retired_methods_.clear();
  impl_.retired_oneway_.clear();
}

void RpcEndpoint::Impl::on_cancel(NodeId from, CallId id) {
  auto it = pending_.find({from, id});
  if (it == pending_.end()) {
    // Waiting for room (dropped now), or not here yet: remembered.
    if (!drop_deferred(from, id)) remember_cancel(peer_counters(from), id);
    return;
  }
  if (auto st = it->second.weak.lock()) st->cancelled = true;
  counters_.counter("rpc.server.cancelled").add();
}

void RpcEndpoint::Impl::on_oneway(NodeId from, const rpc::RpcHeader& h,
                                  std::span<const std::byte> body) {
  auto it = oneway_.find(h.word);
  if (it == oneway_.end() || !it->second) {
    counters_.counter("rpc.server.unknown_oneway").add();
    return;
  }
  peer_counters(from).oneway_received->add_owned();
  RpcRequest req;
  req.from = from;
  req.method = h.word;
  req.body = body;
  const Running running(*this);  // the handler may replace itself (set_oneway keeps it)
  (*it->second)(req);
}

void RpcEndpoint::Impl::finish(RpcResponder::State& state, rpc::RpcStatus status,
                               std::uint32_t code, std::span<const std::byte> body) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed()) return;  // the endpoint went: the reply is dropped
  // Only this state's own entry: after a reset a new request may hold the same key.
  if (auto it = pending_.find({state.peer, state.id});
      it != pending_.end() && it->second.state == &state) {
    it->second = {};  // its weak reference goes now, not when the node is reused
    PendingMap::node_type node = pending_.extract(it);
    if (spare_pending_.size() < kSpareNodes) spare_pending_.push_back(std::move(node));
    pending_ended(state.peer);
    check_drained();
  }
  if (state.cancelled) {
    counters_.counter("rpc.server.reply_dropped").add();
    return;
  }
  send_reply(state.peer, state.id, status, code, body, state.dedupe ? &state : nullptr);
}

void RpcEndpoint::Impl::update_pause(NodeId peer, PeerCounters& pc) {
  const std::size_t max = options_.max_pending_requests;
  const bool pause = (max != 0 && pc.pending >= max) || pc.deferred != 0 ||
                     (!pc.waiting.empty() &&
                      (pc.waiting.size() >= pause_at_ || pc.waiting_bytes >= wait_max_bytes_));
  if (pause == pc.paused || closed()) return;
  pc.paused = pause;
  if (pause) counters_.counter("rpc.server.read_paused").add();
  port_.set_read_paused(peer, pause);
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
  if (auto ep = st->endpoint.lock()) ep->answer(std::move(st), rpc::RpcStatus::ok, 0, body);
}

void RpcResponder::error(std::uint32_t app_code, std::span<const std::byte> body) {
  auto st = std::move(state_);
  if (!st) return;
  if (auto ep = st->endpoint.lock()) {
    ep->answer(std::move(st), rpc::RpcStatus::handler_error, app_code, body);
  }
}

bool RpcResponder::cancelled() const noexcept {
  return state_ != nullptr && state_->cancelled;
}

}  // namespace rmsg
