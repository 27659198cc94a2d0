// Sessions' control path: creation and reset, connect attempts, backoff, the handshake
// slots (max_handshakes), and what a lost connection means for its session.
#include <utility>

#include "msg/messenger_impl.h"
#include "rmsg/log.h"

namespace rmsg {

Session* Messenger::Impl::find_session_slow(NodeId peer) {
  auto it = sessions_.find(peer);
  if (it == sessions_.end()) return nullptr;
  session_cache_peer_ = peer;
  session_cache_ = it->second.get();
  return session_cache_;
}

Cookie Messenger::Impl::new_cookie() {
  Cookie c = 0;
  while (c == 0) c = loop_.random().next();
  return c;
}

Session& Messenger::Impl::session_for(NodeId peer) {
  if (Session* s = find_session(peer)) return *s;
  (void)room_for_session();  // our own send is never refused for it: at most it evicts
  auto s =
      std::make_unique<Session>(peer, ack_policy_, backoff_policy_,
                                std::make_unique<msg::OutQueue>(limits_, admission_->total(),
                                                                &admission_->session(peer), &pool_),
                                new_cookie());
  auto pol = policies_.find(peer);
  s->policy = pol == policies_.end() ? options_.default_policy : pol->second;
  s->fo.probe_backoff = msg::Backoff(probe_policy_);
  counters_.counter("msg.sessions").add_owned();
  Session& ref = *s;
  sessions_.emplace(peer, std::move(s));
  admission_->live_sessions.fetch_add(1, std::memory_order_relaxed);
  counters_.counter("msg.sessions_live").set(sessions_.size());
  note_unconnected(ref);  // until its first connection opens
  return ref;
}

void Messenger::Impl::reset_session(Session& s, std::error_code why, bool report) {
  msg::Handback h = s.out().take_all();
  // The old queue's end (below) ends a refusal episode: the new one starts empty.
  const bool refused = s.out().refused();
  auto pol = policies_.find(s.peer);
  s.restart(std::make_unique<msg::OutQueue>(limits_, admission_->total(),
                                            &admission_->session(s.peer), &pool_),
            msg::InState(ack_policy_), new_cookie(),
            pol == policies_.end() ? options_.default_policy : pol->second);
  counters_.counter("msg.resets").add_owned();
  RMSG_LOG(info, "msg: node %llx: session with %llx reset (%s): %zu unknown, %zu unsent",
           static_cast<unsigned long long>(options_.node_id),
           static_cast<unsigned long long>(s.peer), why.message().c_str(), h.unknown.size(),
           h.unsent.size());
  if (report) {
    emit(SessionEvent{SessionEvent::Kind::reset, s.peer, why, std::move(h.unknown),
                      std::move(h.unsent)},
         std::move(h.unknown_services), std::move(h.unsent_services));
  }
  if (refused) emit(SessionEvent{SessionEvent::Kind::writable, s.peer, {}, {}, {}});
  if (!quiet_room_) note_total_room();  // the handback gave the messenger-wide budget back
  check_drained();
}

void Messenger::Impl::emit(SessionEvent event, std::vector<std::uint16_t> unknown_services,
                           std::vector<std::uint16_t> unsent_services) {
  if (!on_event_) return;
  std::weak_ptr<Impl> weak = weak_from_this();
  auto shared = std::make_shared<ShardEvent>(
      ShardEvent{std::move(event), std::move(unknown_services), std::move(unsent_services)});
  loop_.defer([weak, shared] {
    if (auto self = weak.lock(); self && !self->shutting_down_) {
      self->on_event_(std::move(*shared));
    }
  });
}

void Messenger::Impl::want_connection(Session& s) {
  if (shutting_down_ || s.state() != Session::State::idle || !peers_.contains(s.peer)) return;
  if (handshakes_ >= options_.max_handshakes) {
    enter(s, Session::State::queued);
    slot_waiters_.push_back(s.peer);
    counters_.counter("msg.handshake_waits").add_owned();
    return;
  }
  start_attempt(s);
}

void Messenger::Impl::schedule_attempt(Session& s, Duration delay) {
  if (shutting_down_ || !peers_.contains(s.peer)) {
    enter(s, Session::State::idle);
    return;
  }
  enter(s, Session::State::backoff);
  std::weak_ptr<Impl> weak = weak_from_this();
  const NodeId peer = s.peer;
  s.timer = loop_.add_timer(delay, [weak, peer] {
    auto self = weak.lock();
    if (!self) return;
    Session* ss = self->find_session(peer);
    if (ss == nullptr) return;
    ss->timer = 0;
    if (ss->state() != Session::State::backoff) return;
    self->enter(*ss, Session::State::idle);
    self->want_connection(*ss);
  });
}

void Messenger::Impl::start_attempt(Session& s) {
  Connection& c = new_connection(Connection::Role::outbound);
  c.peer = s.peer;
  c.holds_slot = true;
  c.attempt_cs = s.connect_seq + 1;
  ++handshakes_;
  begin_attempt(s, c.id);  // open: a probe
  counters_.counter("msg.connects").add_owned();
  std::weak_ptr<Impl> weak = weak_from_this();
  const ConnId id = c.id;
  c.deadline = loop_.add_timer(options_.handshake_timeout, [weak, id] {
    if (auto self = weak.lock()) {
      if (Connection* cc = self->find_connection(id)) cc->deadline = 0;
      self->fail(id, make_error_code(MessengerErrc::handshake_timeout));
    }
  });
  const ConnectionParams& params = attempt_params(s, c);
  RMSG_LOG(debug, "msg: node %llx: connection %llu: connecting to %llx over %s%s",
           static_cast<unsigned long long>(options_.node_id), static_cast<unsigned long long>(id),
           static_cast<unsigned long long>(s.peer), to_string(c.transport),
           s.state() == Session::State::probing ? " (probe)" : "");
  streams_->connect(params, [weak, id](Result<Stream> r) {
    auto self = weak.lock();
    if (!self) return;  // the stream (if any) closes as `r` goes
    self->on_connected(id, std::move(r));
  });
}

void Messenger::Impl::release_slot(Connection& c) {
  if (!c.holds_slot) return;
  c.holds_slot = false;
  --handshakes_;
  while (handshakes_ < options_.max_handshakes && !slot_waiters_.empty()) {
    const NodeId peer = slot_waiters_.front();
    slot_waiters_.pop_front();
    Session* s = find_session(peer);
    if (s == nullptr || s->state() != Session::State::queued) continue;
    enter(*s, Session::State::idle);
    want_connection(*s);
  }
}

void Messenger::Impl::enter(Session& s, Session::State to) {
  const Session::State from = s.state();
  if (!s.to(to)) illegal_transition("session", s.peer, state_name(from), state_name(to));
}

void Messenger::Impl::enter(Connection& c, Connection::State to) {
  const Connection::State from = c.state();
  if (!c.to(to)) illegal_transition("connection", c.id, state_name(from), state_name(to));
}

void Messenger::Impl::begin_attempt(Session& s, ConnId id) {
  const Session::State from = s.state();
  if (!s.begin_attempt(id)) {
    illegal_transition("session", s.peer, state_name(from), "connecting or probing");
  }
}

void Messenger::Impl::end_attempt(Session& s) {
  if (!s.end_attempt()) illegal_transition("session", s.peer, "probing", "open");
}

void Messenger::Impl::illegal_transition(const char* what, std::uint64_t who, const char* from,
                                         const char* to) {
  counters_.counter("msg.illegal_transitions").add_owned();
  RMSG_LOG(warn, "msg: node %llx: %s %llx: illegal transition %s -> %s refused",
           static_cast<unsigned long long>(options_.node_id), what,
           static_cast<unsigned long long>(who), from, to);
}

void Messenger::Impl::attempt_failed(Session& s, std::error_code why) {
  if (failover_attempt_failed(s, why)) return;
  end_attempt(s);
  counters_.counter("msg.connect_failures").add_owned();
  emit(SessionEvent{SessionEvent::Kind::failed, s.peer, why, {}, {}});
  if (s.state() == Session::State::connecting) {
    schedule_attempt(s, s.backoff.next(loop_.random()));
  }
}

void Messenger::Impl::connection_lost(Session& s, std::error_code why) {
  s.lose_connection();
  enter(s, Session::State::idle);
  note_unconnected(s);
  counters_.counter("msg.disconnects").add_owned();
  if (shutting_down_) return;
  emit(SessionEvent{SessionEvent::Kind::disconnected, s.peer, why, {}, {}});
  if (s.policy == SessionPolicy::lossy) {
    reset_session(s, make_error_code(MessengerErrc::lossy_fault), true);
    return;
  }
  s.out().rewind();
  if (failover_on_loss(s, why)) return;
  if (peers_.contains(s.peer)) schedule_attempt(s, s.backoff.next(loop_.random()));
}

}  // namespace rmsg
