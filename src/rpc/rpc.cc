// The error category; a shard's start and close, its demultiplexing of messages and
// session events, its per-peer counters. (The public RpcEndpoint: rpc_front.cc.)
#include <cstdint>
#include <string>
#include <utility>

#include "base/retry_rules.h"
#include "rpc/rpc_impl.h"

namespace rmsg {
namespace {

class RpcCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rmsg.rpc"; }
  std::string message(int ev) const override {
    switch (static_cast<RpcErrc>(ev)) {
      case RpcErrc::handler_error:
        return "rpc handler error";
      case RpcErrc::unknown_method:
        return "rpc unknown method";
      case RpcErrc::too_large:
        return "rpc request too large";
      case RpcErrc::shutting_down:
        return "rpc endpoint shutting down";
      case RpcErrc::timeout:
        return "rpc deadline passed";
      case RpcErrc::cancelled:
        return "rpc call cancelled";
      case RpcErrc::session_reset:
        return "rpc session reset (the call may or may not have run)";
    }
    return "unknown rpc error";
  }
};

ErrorKind rpc_kind(int code) noexcept {
  switch (static_cast<RpcErrc>(code)) {
    case RpcErrc::handler_error:
      return ErrorKind::application;
    case RpcErrc::unknown_method:
    case RpcErrc::too_large:
      return ErrorKind::rejected;
    case RpcErrc::shutting_down:
      return ErrorKind::shutting_down;
    case RpcErrc::timeout:
      return ErrorKind::timeout;
    case RpcErrc::cancelled:
      return ErrorKind::cancelled;
    case RpcErrc::session_reset:
      return ErrorKind::session_reset;
  }
  return ErrorKind::other;
}

}  // namespace

const std::error_category& rpc_category() noexcept {
  static const RpcCategory category;
  // rmsg/rpc.h, RpcErrc: a timeout and a session reset (retry_of says whether it ran).
  static const bool rule = register_retryable(
      category, retry_codes({RpcErrc::timeout, RpcErrc::session_reset}), rpc_kind);
  static_cast<void>(rule);
  return category;
}

RpcEndpoint::Impl::Impl(EventLoop& loop, const RpcOptions& options,
                        Messenger::EventCallback on_event, std::shared_ptr<Shared> shared,
                        std::size_t index, std::size_t count)
    : loop_(loop),
      options_(options),
      pause_at_(options.max_pending_requests != 0 ? options.max_pending_requests : SIZE_MAX),
      on_event_(std::move(on_event)),
      shared_(std::move(shared)),
      counters_(shared_->counters),
      id_index_(index),
      id_stride_(count),
      call_states_(options.max_outstanding, index, count),
      next_id_(index + 1),
      outstanding_(shared_->outstanding),
      dedupe_(options.dedupe_entries) {}

void RpcEndpoint::Impl::start(Messenger& messenger, ServiceId service) {
  // Shard i of the endpoint is on the loop of the messenger's shard i (rpc_front.cc).
  port_ = msg::MessengerPort(messenger, id_index_);
  service_ = service;
  wait_max_bytes_ = port_.options().session_max_bytes;
}

void RpcEndpoint::Impl::close() {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  shut_ = true;
  calls_failed_ = true;
  fail_calls(0, make_error_code(RpcErrc::shutting_down));
  if (deadline_timer_ != 0) loop_.cancel_timer(deadline_timer_);
  deadline_timer_ = 0;
  drainer_.abandon();
  drain_done_ = {};
  // Their answers, from any thread, find the shard closed and are dropped.
  for (auto& [key, p] : pending_) {
    if (auto st = p.weak.lock()) st->cancelled = true;
  }
  pending_.clear();
  spare_states_.clear();
  flush_backlog(0, false);
  port_.close();
}

void RpcEndpoint::Impl::on_message(NodeId from, std::span<const std::byte> payload) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed()) return;  // the endpoint is going: its service is detached next
  // An empty message is a request the caller withdrew (Messenger::withdraw).
  if (payload.empty()) {
    counters_.counter("rpc.withdrawn_seen").add();
    return;
  }
  const auto h = rpc::decode_rpc(payload);
  if (!h) {
    counters_.counter("rpc.bad_messages").add();
    return;
  }
  const auto body = payload.subspan(rpc::RpcHeader::kSize);
  switch (h->kind) {
    case rpc::RpcKind::request:
      on_request(from, *h, body);
      break;
    case rpc::RpcKind::reply:
      on_reply(from, *h, body);
      break;
    case rpc::RpcKind::cancel:
      on_cancel(from, h->id);
      break;
    case rpc::RpcKind::oneway:
      on_oneway(from, *h, body);
      break;
  }
}

void RpcEndpoint::Impl::on_event(SessionEvent event) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed()) return;
  if (event.kind == SessionEvent::Kind::failed) {
    unreached_[event.peer] = event.error;
  } else if (event.kind != SessionEvent::Kind::disconnected &&
             event.kind != SessionEvent::Kind::writable) {
    unreached_.erase(event.peer);  // connected, switched, or a new session after a reset
  }
  if (event.kind == SessionEvent::Kind::reset) {
    fail_calls(event.peer, make_error_code(RpcErrc::session_reset));
    drop_pending(event.peer);
    // Whatever the cause, the next session's calls are new ones (a caller that restarted
    // unseen numbers from 1 again): its stored replies answer none of them.
    dedupe_.forget(event.peer);
    forget_peer(event.peer);
  } else if (event.kind == SessionEvent::Kind::writable) {
    flush_held(event.peer);
  }
  if (on_event_) on_event_(std::move(event));
}

// A reset peer's entry goes (its held replies, remembered cancels; its counters stay in
// the CounterSet), unless calls to it were started meanwhile (by a callback of those the
// reset failed): those point at it.
void RpcEndpoint::Impl::forget_peer(NodeId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  PeerCounters& pc = it->second;
  pc.held.clear();
  if (pc.outstanding != 0 || pc.pending != 0 || pc.deferred != 0) {
    update_pause(peer, pc);
    return;
  }
  if (pc.paused && !closed()) port_.set_read_paused(peer, false);
  if (peer_cache_ == &pc) {
    peer_cache_id_ = 0;
    peer_cache_ = nullptr;
  }
  peers_.erase(it);
}

// The requests of a session that ended: their replies must not reach the next session,
// whose calls the peer numbers afresh (a restarted peer reuses the ids).
void RpcEndpoint::Impl::drop_pending(NodeId peer) {
  auto it = pending_.lower_bound({peer, 0});
  while (it != pending_.end() && it->first.first == peer) {
    if (auto st = it->second.weak.lock()) st->cancelled = true;
    it = pending_.erase(it);
    pending_ended(peer);
  }
  flush_backlog(peer, false);
  if (auto p = peers_.find(peer); p != peers_.end()) {
    p->second.early_cancels.clear();  // ids count from 1 again
    p->second.waiting.clear();        // its caller's calls failed with session_reset
    p->second.waiting_bytes = 0;
  }
}

RpcEndpoint::Impl::PeerCounters& RpcEndpoint::Impl::find_peer(NodeId node) {
  auto it = peers_.find(node);
  if (it == peers_.end()) it = peers_.emplace(node, make_peer(node)).first;
  peer_cache_id_ = node;
  peer_cache_ = &it->second;  // an entry stays where it is until forget_peer() erases it
  return it->second;
}

RpcEndpoint::Impl::PeerCounters RpcEndpoint::Impl::make_peer(NodeId node) {
  std::string p = "rpc.peer." + std::to_string(node) + ".";
  // Names in the CounterSet stay for good: a peer named once keeps its counters, and past
  // max_peer_counters named peers the others share this shard's "other" bucket (written
  // by this loop only, like a peer's own).
  if (counters_.find_histogram(p + "call_ns") == nullptr && !take_name()) {
    p = id_stride_ == 1 ? "rpc.peer.other." : "rpc.peer.other." + std::to_string(id_index_) + ".";
  }
  PeerCounters c;
  c.calls = &counters_.counter(p + "calls");
  c.ok = &counters_.counter(p + "ok");
  c.failed = &counters_.counter(p + "failed");
  c.timeouts = &counters_.counter(p + "timeouts");
  c.cancelled = &counters_.counter(p + "cancelled");
  c.served = &counters_.counter(p + "served");
  c.oneway_sent = &counters_.counter(p + "oneway_sent");
  c.oneway_received = &counters_.counter(p + "oneway_received");
  c.latency = &counters_.histogram(p + "call_ns");
  return c;
}

bool RpcEndpoint::Impl::take_name() noexcept {
  auto& n = shared_->named_peers;
  std::size_t v = n.load(std::memory_order_relaxed);
  while (v < options_.max_peer_counters) {
    if (n.compare_exchange_weak(v, v + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

std::optional<RpcPeerStats> RpcEndpoint::Impl::peer_stats(NodeId node) const {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  auto it = peers_.find(node);
  if (it == peers_.end()) {
    // Reset and forgotten (or never seen): its named counters, if it has any, remain.
    const std::string p = "rpc.peer." + std::to_string(node) + ".";
    const Histogram* latency = counters_.find_histogram(p + "call_ns");
    if (latency == nullptr) return std::nullopt;
    const auto v = [&](const char* name) { return counters_.value(p + name); };
    return RpcPeerStats{v("calls"),
                        v("ok"),
                        v("failed"),
                        v("timeouts"),
                        v("cancelled"),
                        v("served"),
                        v("oneway_sent"),
                        v("oneway_received"),
                        0,
                        latency};
  }
  const PeerCounters& c = it->second;
  return RpcPeerStats{
      c.calls->value(),     c.ok->value(),     c.failed->value(),      c.timeouts->value(),
      c.cancelled->value(), c.served->value(), c.oneway_sent->value(), c.oneway_received->value(),
      c.outstanding,        c.latency};
}

}  // namespace rmsg
