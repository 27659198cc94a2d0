// The endpoint-wide bound on pending requests (RpcOptions::max_pending_requests_total;
// docs/messenger.md, Flow control): one count of requests in handlers for every shard,
// taken before a handler runs and given back when its responder answers (or its session
// is reset). A request read while there is no room waits in its shard's backlog (a copy)
// and pauses its peer's reading (the messenger stops right after that message, so a peer
// has about one request waiting, not more); as answers make room, the oldest waiting
// request runs and its peer is read again.
//
// Room made on one loop goes to that loop's backlog first; other shards with a backlog
// are woken by a posted serve_backlog(). No wake-up is lost: a shard that defers counts
// itself waiting and then looks at the count again; one that makes room lowers the count
// and then looks for waiting shards (both sequentially consistent, so at least one of
// the two sees the other).
//
// Threading: the shard's loop, but take_room() and the wake-up flags (atomics).
#include <utility>

#include "rpc/rpc_impl.h"

namespace rmsg {
namespace {
constexpr auto kSeq = std::memory_order_seq_cst;
}  // namespace

bool RpcEndpoint::Impl::take_room() noexcept {
  auto& n = shared_->pending_total;
  std::size_t v = n.load(kSeq);
  // No transient overshoot (a fetch_add undone later could hide room from another shard).
  while (v < options_.max_pending_requests_total) {
    if (n.compare_exchange_weak(v, v + 1, kSeq)) return true;
  }
  return false;
}

void RpcEndpoint::Impl::release_room() {
  shared_->pending_total.fetch_sub(1, kSeq);
  if (!backlog_.empty()) return schedule_backlog();
  if (shared_->waiting_shards.load(kSeq) == 0) return;
  for (const auto& weak : shared_->shards) {
    auto s = weak.lock();
    if (!s || s.get() == this || !s->waiting_.load(kSeq)) continue;
    if (s->wake_posted_.exchange(true, kSeq)) continue;  // one posted already
    s->loop_.post([weak] {
      if (auto self = weak.lock()) {
        self->wake_posted_.store(false, kSeq);
        self->serve_backlog();
      }
    });
  }
}

void RpcEndpoint::Impl::defer(NodeId from, PeerCounters& pc, const rpc::RpcHeader& h,
                              std::span<const std::byte> body, Clock::time_point rx) {
  backlog_.push_back(Deferred{from, h, std::vector<std::byte>(body.begin(), body.end()), rx});
  ++pc.deferred;
  counters_.counter("rpc.server.deferred").add();
  update_pause(from, pc);
  if (!waiting_.load(kSeq)) {
    waiting_.store(true, kSeq);
    shared_->waiting_shards.fetch_add(1, kSeq);
  }
  // Room made after our take_room() failed, by a shard that saw nobody waiting.
  if (shared_->pending_total.load(kSeq) < options_.max_pending_requests_total) {
    schedule_backlog();
  }
}

void RpcEndpoint::Impl::schedule_backlog() {
  if (backlog_scheduled_) return;
  backlog_scheduled_ = true;
  std::weak_ptr<Impl> weak = weak_from_this();
  // On a later turn: not inside the answer (or handler) that made the room.
  loop_.defer([weak] {
    if (auto self = weak.lock()) {
      self->backlog_scheduled_ = false;
      self->serve_backlog();
    }
  });
}

void RpcEndpoint::Impl::serve_backlog() {
  if (closed()) return;
  while (!backlog_.empty()) {
    Deferred& front = backlog_.front();
    if (!front.has_room) {
      if (!take_room()) break;
      front.has_room = true;
      PeerCounters& pc = peer_counters(front.from);
      --pc.deferred;
      const bool was_paused = pc.paused;
      update_pause(front.from, pc);
      if (was_paused && !pc.paused) {
        // Its peer is read again first (on a later turn, before this one's): what it
        // sent meanwhile, a cancel of this very request perhaps, is seen before it runs.
        schedule_backlog();
        break;
      }
    }
    Deferred d = std::move(front);
    backlog_.pop_front();
    PeerCounters& pc = peer_counters(d.from);
    // Refused after all (cancelled, shutting down, expired meanwhile...): its room goes back.
    if ((!pc.early_cancels.empty() && cancelled_early(pc, d.header, d.body.size())) ||
        !serve(d.from, pc, d.header, d.body, d.rx, true)) {
      release_room();
    }
  }
  note_backlog();
}

void RpcEndpoint::Impl::note_backlog() {
  if (backlog_.empty() && waiting_.load(kSeq)) {
    waiting_.store(false, kSeq);
    shared_->waiting_shards.fetch_sub(1, kSeq);
  }
}

void RpcEndpoint::Impl::flush_backlog(NodeId peer, bool reply) {
  std::size_t rooms = 0;  // given back after the loop (release_room() may serve the backlog)
  for (auto it = backlog_.begin(); it != backlog_.end();) {
    if (peer != 0 && it->from != peer) {
      ++it;
      continue;
    }
    const NodeId from = it->from;
    const CallId id = it->header.id;
    const bool had_room = it->has_room;
    it = backlog_.erase(it);
    if (had_room) {
      ++rooms;
    } else {
      PeerCounters& pc = peer_counters(from);
      --pc.deferred;
      update_pause(from, pc);
    }
    if (reply) send_reply(from, id, rpc::RpcStatus::shutting_down, 0, {}, nullptr);
  }
  note_backlog();
  while (rooms-- > 0) release_room();
}

bool RpcEndpoint::Impl::drop_deferred(NodeId from, CallId id) {
  if (auto p = peers_.find(from); p != peers_.end()) {  // waiting behind held replies
    auto& w = p->second.waiting;
    for (auto it = w.begin(); it != w.end(); ++it) {
      if (it->header.id != id) continue;
      p->second.waiting_bytes -= it->body.size();
      w.erase(it);
      counters_.counter("rpc.server.cancelled_unrun").add();
      update_pause(from, p->second);
      return true;
    }
  }
  for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
    if (it->from != from || it->header.id != id) continue;
    const bool had_room = it->has_room;
    backlog_.erase(it);
    counters_.counter("rpc.server.cancelled_unrun").add();
    note_backlog();
    if (had_room) {
      release_room();
    } else {
      PeerCounters& pc = peer_counters(from);
      --pc.deferred;
      update_pause(from, pc);
    }
    return true;
  }
  return false;
}

}  // namespace rmsg
