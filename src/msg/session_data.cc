// The data path of an open connection: messages out of the session's queue (pump), frames
// in (messages, acks, keepalives, close), dispatch and the acks that follow it.
#include <utility>

#include "msg/messenger_impl.h"

namespace rmsg {

using msg::FrameType;

void Messenger::Impl::on_open_frame(Connection& c, msg::Frame& f) {
  const ConnId id = c.id;
  Session* s = find_session(c.peer);
  if (s == nullptr || s->conn() != id) return drop(id, false);
  // Made only on failure: messenger_category() is a function-local static (a guard check).
  auto bad = [] { return make_error_code(MessengerErrc::bad_payload); };
  switch (f.type()) {
    case FrameType::message: {
      auto h = msg::decode_message_header(f.segment(0));
      if (!h) return fail(id, bad());
      if (!s->out().ack(h->ack)) return fail(id, make_error_code(MessengerErrc::bad_ack));
      auto r = c.reasm->feed(s->in, h->seq, h->flags, f.segment(1));
      if (!r) return fail(id, r.error());
      if (r.value() == msg::Reassembler::Outcome::duplicate) hot_.duplicates_dropped.add_owned();
      if (r.value() == msg::Reassembler::Outcome::complete) {
        const NodeId peer = c.peer;
        deliver(c, *s, h->seq, h->service, f);
        s = find_session(peer);
        if (s == nullptr || s->conn() != id) return;
      }
      note_room(*s);
      pump_after_ack(*s);  // the piggybacked ack may have opened the window
      return;
    }
    case FrameType::ack: {
      auto v = msg::decode_value64(f.segment(0));
      if (!v) return fail(id, bad());
      if (!s->out().ack(v->value)) return fail(id, make_error_code(MessengerErrc::bad_ack));
      hot_.acks_received.add_owned();
      note_room(*s);
      pump_after_ack(*s);
      return;
    }
    case FrameType::keepalive: {
      // An answer counts against the write buffer like a message: past it the peer is not
      // reading, and one ack waiting already tells it we are alive (review #7).
      if (c.pending_bytes() >= options_.write_buffer) {
        counters_.counter("msg.keepalive_acks_dropped").add_owned();
        return;
      }
      const auto p = f.segment(0);
      c.queue_control(FrameType::keepalive_ack, p.size() >= 8 ? p.first(8) : p);
      flush(c);
      return;
    }
    case FrameType::keepalive_ack:
      if (c.probe_for != 0) {  // a takeover probe waits for this connection's answer
        if (auto v = msg::decode_value64(f.segment(0))) probe_answered(c, v->value);
      }
      return;
    case FrameType::close:
      return fail(id, make_error_code(MessengerErrc::peer_closed));
    default:
      return fail(id, make_error_code(MessengerErrc::unexpected_frame));
  }
}

void Messenger::Impl::deliver(Connection& c, Session& s, msg::Seq seq, std::uint16_t service,
                              msg::Frame& f) {
  const ConnId id = c.id;
  const NodeId peer = c.peer;
  const Cookie session = s.my_cookie();
  // A message in pieces leaves the connection's buffer first: the callback may close the
  // connection. (One that came in one frame has no buffer to move.)
  std::vector<std::byte> whole;
  if (c.reasm->buffered()) whole = c.reasm->take_buffer();
  dispatch_rx_ = c.last_rx;
  dispatch_(peer, service, whole.empty() ? f.segment(1) : std::span<const std::byte>(whole));
  hot_.delivered.add_owned();
  // The callback may have dropped the session or this connection (a send from it can fail
  // the connection). The message was handed over either way: unless the session itself
  // went, it counts as delivered, or the replay on the next connection would dispatch it a
  // second time.
  Session* ss = find_session(peer);
  if (ss == nullptr || ss->my_cookie() != session) return;
  // The time the bytes were read stands for now (one clock read per read call).
  Connection* cc = find_connection(id);
  const Clock::time_point now = cc != nullptr ? cc->last_rx : loop_.now();
  const bool ack_due = ss->in.delivered(seq, now);
  if (ss->conn() != id || cc == nullptr) return;
  if (ack_due) {
    send_ack(*cc, *ss);
  } else if (cc->ack_timer == 0) {  // armed already: it re-checks when it fires
    arm_ack_timer(*cc, *ss, now);
  }
}

void Messenger::Impl::note_room(Session& s) {
  check_drained();
  msg::QueueBudget& total = admission_->total();
  if (total.refused_queues.load(std::memory_order_acquire) == 0) return;
  if (s.out().take_writable()) emit(SessionEvent{SessionEvent::Kind::writable, s.peer, {}, {}, {}});
  if (total.refused_queues.load(std::memory_order_acquire) == 0 || !total.below_half()) return;
  // Others refused because of the messenger-wide budget: this ack may have made room, here
  // and on the other loops.
  sweep_writable();
  if (total.refused_queues.load(std::memory_order_acquire) != 0 && on_total_room_) {
    on_total_room_();
  }
}

void Messenger::Impl::sweep_writable() {
  for (auto& [peer, other] : sessions_) {
    if (other->out().take_writable()) {
      emit(SessionEvent{SessionEvent::Kind::writable, other->peer, {}, {}, {}});
    }
  }
  if (!refused_without_session_.empty()) sweep_refused_without_session();
}

void Messenger::Impl::pump(Session& s) {
  Connection* c = s.conn() != 0 ? find_connection(s.conn()) : nullptr;
  if (c == nullptr || c->state() != Connection::State::open) return;
  bool wrote = false;
  bool drained = false;  // next() had nothing (more) to write
  while (c->pending_bytes() < options_.write_buffer) {
    if (s.out().all_written()) {
      drained = true;
      break;
    }
    const std::optional<msg::Chunk> m = s.out().next();
    if (!m) {
      drained = true;
      break;
    }
    const msg::MessageHeader header{m->seq, s.in.in_seq(), msg::message_flags(m->lane, m->more),
                                    m->service};
    if (!c->queue_message(header, m->bytes)) break;
    if (m->first && m->replay) hot_.replayed.add_owned();
    if (m->first) hot_.sent.add_owned();
    if (m->more || !m->first) counters_.counter("msg.fragments").add_owned();
    s.out().mark_written(*m);
    wrote = true;
  }
  // Nothing to write (an ack or a frame that found the queue empty, the usual case).
  if (drained && !wrote && c->pending_bytes() == 0) return;
  if (wrote) s.in.note_ack_sent();  // the ack timer stays: it finds nothing pending
  const ConnId id = c->id;
  flush(*c);
  // The stream took everything and chunks remain (a large message, which no ack will pull
  // out): continue after the loop served the others, instead of in one go.
  c = find_connection(id);
  if (c == nullptr || c->pending_bytes() > 0 || c->pump_deferred || drained || !s.out().next()) {
    return;
  }
  c->pump_deferred = true;
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.defer([weak, id] {
    auto self = weak.lock();
    if (!self) return;
    Connection* cc = self->find_connection(id);
    if (cc == nullptr) return;
    cc->pump_deferred = false;
    if (Session* ss = self->find_session(cc->peer); ss != nullptr && ss->conn() == id) {
      self->pump(*ss);
    }
  });
}

void Messenger::Impl::pump_after_ack(Session& s) {
  // An ack only opens the window: with every queued message started (the usual case for
  // request/response, whose sends pumped themselves) there is nothing it could let out. A
  // started message's further chunks do not wait for acks (pump defers itself for them).
  if (s.out().in_flight() < s.out().size()) pump(s);
}

void Messenger::Impl::send_ack(Connection& c, Session& s) {
  const auto v = msg::encode(msg::Value64{s.in.in_seq()});
  c.queue_control(FrameType::ack, v);
  s.in.note_ack_sent();
  counters_.counter("msg.acks_sent").add_owned();
  flush(c);
}

// One timer per connection at a time, never cancelled: when a frame carried the ack
// meanwhile (the usual case for request/reply traffic) it fires, finds nothing pending and
// is not re-armed, so a message costs no timer insertion and removal.
void Messenger::Impl::arm_ack_timer(Connection& c, Session& s, Clock::time_point now) {
  if (c.ack_timer != 0) return;
  Duration delay = s.in.ack_deadline() - now;
  if (delay < Duration::zero()) delay = Duration::zero();
  std::weak_ptr<Impl> weak = weak_from_this();
  const ConnId id = c.id;
  c.ack_timer = loop_.add_timer(delay, [weak, id] {
    auto self = weak.lock();
    if (!self) return;
    Connection* cc = self->find_connection(id);
    if (cc == nullptr) return;
    cc->ack_timer = 0;
    Session* ss = self->find_session(cc->peer);
    if (ss == nullptr || ss->conn() != id || !ss->in.ack_pending()) return;
    // Pending since after the timer was armed: wait out that message's own delay.
    const Clock::time_point at = self->loop_.now();
    if (ss->in.ack_deadline() > at) return self->arm_ack_timer(*cc, *ss, at);
    self->send_ack(*cc, *ss);
  });
}

}  // namespace rmsg

namespace rmsg {

void Messenger::Impl::start_keepalive(Connection& c) {
  c.last_rx = c.last_tx = loop_.now();
  const Duration ka = options_.keepalive_interval;
  const Duration idle = options_.idle_timeout;
  if (ka <= Duration::zero() && idle <= Duration::zero()) return;
  // One tick serves both: the shorter period, so neither is late by more than a tick.
  Duration period = ka > Duration::zero() ? ka : idle;
  if (idle > Duration::zero() && idle / 4 < period) period = idle / 4;
  std::weak_ptr<Impl> weak = weak_from_this();
  const ConnId id = c.id;
  c.keepalive = loop_.add_periodic(period, [weak, id] {
    if (auto self = weak.lock()) self->keepalive_tick(id);
  });
}

void Messenger::Impl::keepalive_tick(ConnId id) {
  Connection* c = find_connection(id);
  if (c == nullptr) return;
  const Clock::time_point now = loop_.now();
  if (c->sent_since_tick) {
    c->last_tx = now;
    c->sent_since_tick = false;
  }
  const Duration idle = options_.idle_timeout;
  // Not reading (paused) says nothing about the peer: the idle clock waits too.
  if (read_paused(*c)) c->last_rx = now;
  if (idle > Duration::zero() && now - c->last_rx >= idle) {
    return fail(id, make_error_code(MessengerErrc::idle_timeout));
  }
  const Duration ka = options_.keepalive_interval;
  if (ka > Duration::zero() && now - c->last_tx >= ka && c->pending_bytes() == 0) {
    const auto stamp =
        msg::encode(msg::Value64{static_cast<std::uint64_t>(now.time_since_epoch().count())});
    c->queue_control(FrameType::keepalive, stamp);
    counters_.counter("msg.keepalives_sent").add_owned();
    c->last_tx = now;  // the keepalive itself: the next is due a full interval from now
    flush(*c);         // may fail and remove the connection
    if (Connection* cc = find_connection(id)) cc->sent_since_tick = false;
  }
}

}  // namespace rmsg
