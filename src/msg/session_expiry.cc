// Sessions' lifetime: a session that has had no connection for session_expiry is reset
// (MessengerErrc::session_expired, with the usual SessionEvent::reset, so that its users
// free what they keep per peer) and erased with its budget; at max_sessions, a new one
// evicts the oldest session that has neither a connection nor an address. Without this,
// every node id that ever completed a handshake would keep a session (and, with queued
// messages, a share of the send budget) for good (docs/messenger.md, Limits).
//
// The sessions without a connection are kept in one list in the order they lost it, so
// one timer (for the oldest) serves them all and eviction finds the oldest at once.
#include <utility>

#include "msg/messenger_impl.h"
#include "rmsg/log.h"

namespace rmsg {

void Messenger::Impl::note_unconnected(Session& s) {
  if (shutting_down_ || !s.note_unconnected(loop_.now(), unconnected_)) return;
  if (expiry_timer_ == 0 && options_.session_expiry > Duration::zero()) {
    std::weak_ptr<Impl> weak = weak_from_this();
    expiry_timer_ = loop_.add_timer(options_.session_expiry, [weak] {
      if (auto self = weak.lock()) {
        self->expiry_timer_ = 0;
        self->expiry_due();
      }
    });
  }
}

void Messenger::Impl::note_connected(Session& s) {
  s.note_connected(unconnected_);
}

void Messenger::Impl::expiry_due() {
  const Clock::time_point now = loop_.now();
  // Every session due now is reset before anyone hears of the room that made: a writable
  // event that came between the resets would invite a send to a peer about to expire.
  std::vector<NodeId> due;
  for (const NodeId peer : unconnected_) {
    const Session* s = find_session(peer);
    if (s == nullptr) continue;
    if (s->unconnected_since() + options_.session_expiry > now) {
      std::weak_ptr<Impl> weak = weak_from_this();
      expiry_timer_ =
          loop_.add_timer(s->unconnected_since() + options_.session_expiry - now, [weak] {
            if (auto self = weak.lock()) {
              self->expiry_timer_ = 0;
              self->expiry_due();
            }
          });
      break;
    }
    due.push_back(peer);
  }
  if (due.empty()) return;
  quiet_room_ = true;
  for (const NodeId peer : due) {
    if (Session* s = find_session(peer)) expire(*s);
  }
  quiet_room_ = false;
  note_total_room();
}

void Messenger::Impl::expire(Session& s) {
  const NodeId peer = s.peer;
  counters_.counter("msg.sessions_expired").add_owned();
  reset_session(s, make_error_code(MessengerErrc::session_expired), true);
  erase_session(peer);
}

void Messenger::Impl::erase_session(NodeId peer) {
  Session* s = find_session(peer);
  if (s == nullptr) return;
  note_connected(*s);  // off the list
  if (s->fo.probe_timer != 0) loop_.cancel_timer(s->fo.probe_timer);
  if (s->conn() != 0) drop(s->conn(), false);
  if (s->outbound() != 0) drop(s->outbound(), false);
  if (s->timer != 0) loop_.cancel_timer(s->timer);
  if (s->paused) --paused_sessions_;
  if (session_cache_peer_ == peer) {
    session_cache_peer_ = 0;
    session_cache_ = nullptr;
  }
  sessions_.erase(peer);  // its queue gives its share of the budgets back
  admission_->live_sessions.fetch_sub(1, std::memory_order_relaxed);
  admission_->forget(peer);
  counters_.counter("msg.sessions_live").set(sessions_.size());
}

bool Messenger::Impl::room_for_session() {
  const std::size_t cap = options_.max_sessions;
  if (cap == 0 || admission_->live_sessions.load(std::memory_order_relaxed) < cap) return true;
  // A session with an address is one the application asked for: it stays.
  for (const NodeId peer : unconnected_) {
    if (peers_.contains(peer) || routes_.contains(peer)) continue;
    Session* s = find_session(peer);
    if (s == nullptr || s->outbound() != 0) continue;
    counters_.counter("msg.sessions_evicted").add_owned();
    expire(*s);
    return true;
  }
  return false;
}

}  // namespace rmsg
