// Replies on their way out (docs/messenger.md, RPC: Replies wait, they are never dropped).
// A reply goes into the peer's session queue, which its bounds (session_max_bytes and the
// messenger's totals) may refuse. A refused reply is not dropped: it waits in the peer's
// `held` list, and the peer's further requests wait unrun (copied, in `waiting`) instead
// of making replies that could not go either. The refusal started an episode whose end,
// SessionEvent::writable (the queue at half its bounds), sends the held replies, oldest
// first; once all are queued the waiting requests run, in order.
//
// The connection is still read meanwhile: the acks that free the queue come on it. Past
// max_pending_requests waiting requests or session_max_bytes of them the peer is no
// longer read (a caller that keeps sending and never reads its replies is held to that);
// a caller with fewer calls outstanding than that never meets it.
//
// Memory: a peer's held replies are those of handlers already running when its queue
// filled (at most max_pending_requests, and max_pending_requests_total over all peers),
// plus the one being dispatched; its waiting requests are bounded as above.
//
// A reply that can never fit (over max_message_size, session_max_bytes or
// total_max_bytes) is answered too_large instead: the caller gets a named error, not a
// deadline. A session reset drops the held replies with the rest of the peer's state (its
// calls fail with session_reset at the caller); so does a new session that came without
// a reset (after Messenger::mark_down): the replies are for ids of the old one.
//
// Threading: the shard's loop.
#include <utility>

#include "rpc/rpc_impl.h"

namespace rmsg {
namespace {

enum class Push { queued, full, never_fits, gone };

}  // namespace

std::uint64_t RpcEndpoint::Impl::session_of(NodeId peer) const {
  return closed() ? 0 : port_.session_cookie(peer);
}

void RpcEndpoint::Impl::send_reply(NodeId to, CallId id, rpc::RpcStatus status, std::uint32_t code,
                                   std::span<const std::byte> body,
                                   const RpcResponder::State* keep) {
  rpc::RpcHeader h;
  h.kind = rpc::RpcKind::reply;
  h.status = status;
  h.word = code;
  h.id = id;
  auto bytes = encode(h, body);  // on the loop (finish(), serve())
  if (keep != nullptr) dedupe_.put({to, id}, keep->session, keep->method, bytes);
  queue_reply(to, std::move(bytes));
}

namespace {

// Queued in the shard that owns `to` (replies go out during the messenger's drain too: a
// request that arrives meanwhile is answered shutting_down, not left to its deadline).
// `bytes` stays the caller's unless queued.
Push push(const msg::MessengerPort& port, NodeId to, std::vector<std::byte>& bytes,
          const Messenger::SendOptions& lane) {
  auto r = port.send_here(to, std::move(bytes), lane, true);
  if (r) return Push::queued;
  if (r.error() == make_error_code(Errc::resource_exhausted)) {
    const std::size_t n = bytes.size();
    const MessengerOptions& o = port.options();
    return n > o.session_max_bytes || n > o.total_max_bytes ? Push::never_fits : Push::full;
  }
  if (r.error() == make_error_code(Errc::invalid_argument)) return Push::never_fits;
  return Push::gone;  // shut down: the messenger sends nothing more
}

}  // namespace

void RpcEndpoint::Impl::queue_reply(NodeId to, std::vector<std::byte> bytes) {
  PeerCounters& pc = peer_counters(to);
  if (pc.held.empty()) {
    switch (push(port_, to, bytes, lane_for(bytes.size()))) {
      case Push::queued:
        return;
      case Push::gone:
        counters_.counter("rpc.reply_not_sent").add();
        return;
      case Push::never_fits: {
        counters_.counter("rpc.server.reply_too_large").add();
        const auto h = rpc::decode_rpc(bytes);
        if (!h || h->status == rpc::RpcStatus::too_large) return;  // cannot happen: 24 bytes
        return send_reply(to, h->id, rpc::RpcStatus::too_large, 0, {}, nullptr);
      }
      case Push::full:
        break;
    }
  }
  // Behind the replies already waiting (they keep their order), or the first to wait.
  counters_.counter("rpc.server.replies_held").add();
  if (pc.held.empty()) pc.held_session = session_of(to);
  pc.held.push_back(std::move(bytes));
}

void RpcEndpoint::Impl::drop_stale_held(NodeId peer, PeerCounters& pc) {
  counters_.counter("rpc.server.reply_dropped").add(pc.held.size());
  pc.held.clear();
  pc.waiting.clear();
  pc.waiting_bytes = 0;
  update_pause(peer, pc);
  check_drained();
}

void RpcEndpoint::Impl::wait_for_replies(NodeId from, PeerCounters& pc, const rpc::RpcHeader& h,
                                         std::span<const std::byte> body) {
  pc.waiting.push_back(Deferred{from, h, std::vector<std::byte>(body.begin(), body.end()),
                                port_.dispatch_time(), false});
  pc.waiting_bytes += body.size();
  counters_.counter("rpc.server.requests_waiting").add();
  update_pause(from, pc);
}

void RpcEndpoint::Impl::flush_held(NodeId peer) {
  auto it = peers_.find(peer);
  if (it == peers_.end() || it->second.held.empty() || closed()) return;
  PeerCounters& pc = it->second;
  if (session_of(peer) != pc.held_session) return drop_stale_held(peer, pc);
  while (!pc.held.empty()) {
    std::vector<std::byte>& front = pc.held.front();
    const Push p = push(port_, peer, front, lane_for(front.size()));
    if (p == Push::full) return;  // a new refusal episode: its writable comes later
    if (p == Push::never_fits) {
      // The bounds changed under it (cannot with fixed options): answered too_large.
      const auto h = rpc::decode_rpc(front);
      pc.held.pop_front();
      if (h) send_reply(peer, h->id, rpc::RpcStatus::too_large, 0, {}, nullptr);
      continue;
    }
    if (p == Push::gone) counters_.counter("rpc.reply_not_sent").add();
    pc.held.pop_front();
  }
  // Its requests that waited, in order, until one's reply has to wait in turn.
  while (pc.held.empty() && !pc.waiting.empty() && !closed()) {
    Deferred d = std::move(pc.waiting.front());
    pc.waiting.pop_front();
    pc.waiting_bytes -= d.body.size();
    serve(d.from, pc, d.header, d.body, d.rx, false, true);
  }
  update_pause(peer, pc);
  check_drained();
}

bool RpcEndpoint::Impl::replies_held() const {
  for (const auto& [peer, pc] : peers_) {
    if (!pc.held.empty()) return true;
  }
  return false;
}

void RpcEndpoint::Impl::answer_waiting() {
  for (auto& [peer, pc] : peers_) {
    std::deque<Deferred> waiting = std::move(pc.waiting);
    pc.waiting.clear();
    pc.waiting_bytes = 0;
    for (const Deferred& d : waiting) {
      send_reply(peer, d.header.id, rpc::RpcStatus::shutting_down, 0, {}, nullptr);
    }
    update_pause(peer, pc);
  }
}

}  // namespace rmsg
