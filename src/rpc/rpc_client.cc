// The calling side: outstanding calls, deadlines (one timer for all: rpc_deadlines.h), replies,
// cancel, one-way messages, and failing calls on a session reset or shutdown.
#include <chrono>
#include <utility>
#include <vector>

#include "rpc/rpc_impl.h"

namespace rmsg {
namespace {

RpcErrc errc_of(rpc::RpcStatus s) noexcept {
  return static_cast<RpcErrc>(static_cast<int>(s));  // statuses 1-5 are RpcErrc 1-5
}

}  // namespace

Result<CallId> RpcEndpoint::Impl::call(NodeId peer, std::uint32_t method,
                                       std::span<const std::byte> body, const CallOptions& options,
                                       CallCallback done) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  const auto now = loop_.now();
  if (auto e = refuse_call(peer, body.size(), options, done, now)) return e;
  CallId id = options.retry_of;
  // A retry reuses an id of this shard (its peer's) that is not outstanding.
  if (id != 0 && (!mine(id) || calls_.contains(id))) return make_error_code(Errc::invalid_argument);
  if (!take_slot()) return make_error_code(Errc::resource_exhausted);
  if (id == 0) id = next_id_.fetch_add(id_stride_, std::memory_order_relaxed);
  rpc::RpcHeader h;
  h.kind = rpc::RpcKind::request;
  h.flags = options.retry_of != 0 ? rpc::kRpcFlagDedupe : 0;
  h.word = method;
  h.id = id;
  h.budget_us = rpc::budget_for(options.deadline, now);
  auto bytes = encode(h, body);
  const auto lane = lane_for(bytes.size());
  // The messenger shard of this loop owns `peer` (this shard serves only its peers).
  auto ticket = port_.send_here(peer, std::move(bytes), lane);
  if (!ticket) {
    --outstanding_;
    return ticket.error();
  }
  call_states_.add(id);  // before call() returns: another thread may cancel it
  Call c;
  c.peer = peer;
  c.ticket = ticket.value();
  c.start = now;
  c.deadline = options.deadline;
  c.done = std::move(done);
  insert_call(id, std::move(c));
  return id;
}

void RpcEndpoint::Impl::insert_call(CallId id, Call&& c) {
  PeerCounters& pc = peer_counters(c.peer);
  c.counters = &pc;
  const Clock::time_point deadline = c.deadline;
  if (spare_calls_.empty()) {
    calls_.emplace(id, std::move(c));
  } else {
    Calls::node_type node = std::move(spare_calls_.back());
    spare_calls_.pop_back();
    node.key() = id;
    node.mapped() = std::move(c);
    calls_.insert(std::move(node));
  }
  deadlines_.push({deadline, id}, calls_.size(), [this](auto add) {
    for (const auto& [cid, call] : calls_) add({call.deadline, cid});
  });
  if (deadlines_.next() < deadline_armed_) arm_deadline_timer();  // else armed early enough
  pc.calls->add_owned();
  ++pc.outstanding;
}

void RpcEndpoint::Impl::complete(CallId id, RpcResponse response) {
  auto it = calls_.find(id);
  if (it != calls_.end()) complete(it, std::move(response), loop_.now());
}

void RpcEndpoint::Impl::complete(Calls::iterator it, RpcResponse response, Clock::time_point end) {
  // A cancel from another thread that claimed the call first decides how it ends (that
  // cancel() returned true): whatever arrived since, it completes cancelled.
  if (call_states_.remove(it->first)) [[unlikely]] {
    response = RpcResponse{};
    response.error = make_error_code(RpcErrc::cancelled);
  }
  // Its deadline entry goes stale (the queue skips it); its node serves the next call.
  Calls::node_type node = calls_.extract(it);
  response.id = node.key();
  Call c = std::move(node.mapped());
  if (spare_calls_.size() < kSpareNodes) spare_calls_.push_back(std::move(node));
  --outstanding_;
  check_drained();
  response.latency = end - c.start;
  PeerCounters& pc = *c.counters;
  --pc.outstanding;
  if (!response.error) {
    pc.ok->add_owned();
    pc.latency->record(static_cast<std::uint64_t>(response.latency.count()));
  } else {
    pc.failed->add_owned();
    if (response.error == make_error_code(RpcErrc::timeout)) pc.timeouts->add_owned();
    if (response.error == make_error_code(RpcErrc::cancelled)) pc.cancelled->add_owned();
  }
  c.done(std::move(response));
}

void RpcEndpoint::Impl::on_reply(NodeId from, const rpc::RpcHeader& h,
                                 std::span<const std::byte> body) {
  auto it = calls_.find(h.id);
  if (it == calls_.end() || it->second.peer != from) {
    // The call timed out or was cancelled meanwhile, or the peer is confused.
    counters_.counter("rpc.late_replies").add();
    return;
  }
  RpcResponse r;
  if (h.status != rpc::RpcStatus::ok) r.error = make_error_code(errc_of(h.status));
  r.app_code = h.word;
  r.body = port_.buffers().take();
  r.body.assign(body.begin(), body.end());
  complete(it, std::move(r), port_.dispatch_time());  // when the reply was read stands for now
}

void RpcEndpoint::Impl::arm_deadline_timer() {
  const Clock::time_point next = deadlines_.next();
  if (next >= deadline_armed_) return;
  if (deadline_timer_ != 0) loop_.cancel_timer(deadline_timer_);
  deadline_armed_ = next;
  std::weak_ptr<Impl> weak = weak_from_this();
  const Duration left = next - loop_.now();
  deadline_timer_ = loop_.add_timer(left > Duration::zero() ? left : Duration::zero(), [weak] {
    if (auto self = weak.lock()) self->deadlines_due();
  });
}

void RpcEndpoint::Impl::deadlines_due() {
  deadline_timer_ = 0;
  deadline_armed_ = Clock::time_point::max();
  for (const auto& e : deadlines_.pop_due(loop_.now())) {
    auto it = calls_.find(e.id);
    // Completed, or the id now belongs to a retry with its own deadline: stale.
    if (it == calls_.end() || it->second.deadline != e.deadline) continue;
    on_deadline(e.id);  // its callback may start calls (and arm the timer)
  }
  arm_deadline_timer();
}

void RpcEndpoint::Impl::on_deadline(CallId id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  // Keep the request out of any replay: it must not run after the caller gave up.
  if (port_.withdraw(it->second.peer, it->second.ticket)) {
    counters_.counter("rpc.withdrawn").add();
  }
  RpcResponse r;
  r.error = make_error_code(RpcErrc::timeout);
  // A peer that could not be reached: say why (refused, no route, no device), not only
  // that the time ran out. Still a timeout for the peer's statistics.
  if (auto u = unreached_.find(it->second.peer); u != unreached_.end() && u->second) {
    r.error = u->second;
    it->second.counters->timeouts->add_owned();
    counters_.counter("rpc.unreachable").add_owned();
  }
  complete(id, std::move(r));
}

bool RpcEndpoint::Impl::cancel(CallId id) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  auto it = calls_.find(id);
  // Not here: perhaps a call from another thread whose request is on its way to this loop
  // (adopt() completes it as cancelled once claimed).
  if (it == calls_.end()) return mine(id) && call_states_.claim(id);
  // False when a cancel from another thread claimed it first (its completion, posted, is
  // done here now instead).
  const bool claimed = call_states_.claim(id);
  cancel_now(it);
  return claimed;
}

void RpcEndpoint::Impl::cancel_now(Calls::iterator it) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  const CallId id = it->first;
  const NodeId peer = it->second.peer;
  if (port_.withdraw(peer, it->second.ticket)) {
    counters_.counter("rpc.withdrawn").add();
  }
  // The request may already have been delivered: tell the server (best effort; a full
  // queue only costs the server some work).
  rpc::RpcHeader h;
  h.kind = rpc::RpcKind::cancel;
  h.id = id;
  if (!port_.send(peer, encode(h, {}), {.lane = Messenger::Lane::priority, .service = service_})) {
    counters_.counter("rpc.cancel_not_sent").add();
  }
  RpcResponse r;
  r.error = make_error_code(RpcErrc::cancelled);
  complete(id, std::move(r));  // by id: the send above may have run callbacks
}

Result<void> RpcEndpoint::Impl::notify(NodeId peer, std::uint32_t method,
                                       std::span<const std::byte> body) {
  if (shut_) return make_error_code(RpcErrc::shutting_down);
  if (body.size() > options_.messenger.max_message_size - rpc::RpcHeader::kSize) {
    return make_error_code(RpcErrc::too_large);
  }
  rpc::RpcHeader h;
  h.kind = rpc::RpcKind::oneway;
  h.word = method;
  const bool here = loop::Access::owned_here(loop_);
  auto bytes = here ? encode(h, body) : rpc::encode_rpc(h, body);
  const auto lane = lane_for(bytes.size());
  RMSG_TRY(port_.send(peer, std::move(bytes), lane));  // any thread
  if (here) {
    peer_counters(peer).oneway_sent->add_owned();
    return {};
  }
  // From another thread: the per-peer counters belong to the loop.
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.post([weak, peer] {
    if (auto self = weak.lock()) self->peer_counters(peer).oneway_sent->add_owned();
  });
  return {};
}

void RpcEndpoint::Impl::fail_calls(NodeId peer, std::error_code why) {
  std::vector<CallId> ids;
  for (const auto& [id, c] : calls_) {
    if (peer == 0 || c.peer == peer) ids.push_back(id);
  }
  for (CallId id : ids) {
    RpcResponse r;
    r.error = why;
    complete(id, std::move(r));  // a callback may have completed others: complete() checks
  }
}

void RpcEndpoint::Impl::shutdown() {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  shut_ = true;
  flush_backlog(0, true);  // waiting requests are answered shutting_down now
  answer_waiting();        // and those behind held replies
  calls_failed_ = true;
  fail_calls(0, make_error_code(RpcErrc::shutting_down));
}

}  // namespace rmsg
