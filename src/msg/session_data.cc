// The data path of an open connection: messages out of the session's queue (pump), frames
// in (messages, acks, keepalives, close), dispatch and the acks that follow it.
#include <utility>

#include "msg/messenger_impl.h"

namespace rmsg {

using msg::FrameType;

void Messenger::Impl::on_open_frame(Connection& c, msg::Frame& f) {
  const ConnId id = c.id;
  Session* s = find_session(c.peer);
  if (s == nullptr || s->conn != id) return drop(id, false);
  const auto bad = make_error_code(MessengerErrc::bad_payload);
  switch (f.type()) {
    case FrameType::message: {
      auto h = msg::decode_message_header(f.segment(0));
      if (!h) return fail(id, bad);
      if (!s->out->ack(h->ack)) return fail(id, make_error_code(MessengerErrc::bad_ack));
      switch (s->in.check(h->seq)) {
        case msg::InState::Verdict::duplicate:
          hot_.duplicates_dropped.add_owned();
          break;
        case msg::InState::Verdict::gap:
          return fail(id, make_error_code(MessengerErrc::sequence_gap));
        case msg::InState::Verdict::deliver: {
          const NodeId peer = c.peer;
          const Cookie session = s->my_cookie;
          const Clock::time_point read_at = c.last_rx;  // `c` may be gone after dispatch
          dispatch_(peer, f.segment(1));
          hot_.delivered.add_owned();
          // The callback may have dropped the session or this connection (a send from it
          // can fail the connection). The message was handed over either way: unless the
          // session itself went, it counts as delivered, or the replay on the next
          // connection would dispatch it a second time.
          s = find_session(peer);
          if (s == nullptr || s->my_cookie != session) return;
          // The time the bytes were read stands for now (one clock read per read call).
          const bool ack_due = s->in.delivered(read_at);
          if (s->conn != id) return;
          Connection* cc = find_connection(id);
          if (ack_due) {
            send_ack(*cc, *s);
          } else {
            arm_ack_timer(*cc, *s, cc->last_rx);
          }
          break;
        }
      }
      pump(*s);  // the piggybacked ack may have opened the window
      return;
    }
    case FrameType::ack: {
      auto v = msg::decode_value64(f.segment(0));
      if (!v) return fail(id, bad);
      if (!s->out->ack(v->value)) return fail(id, make_error_code(MessengerErrc::bad_ack));
      hot_.acks_received.add_owned();
      pump(*s);
      return;
    }
    case FrameType::keepalive: {
      const auto p = f.segment(0);
      queue_control(c, FrameType::keepalive_ack, p.size() >= 8 ? p.first(8) : p);
      flush(c);
      return;
    }
    case FrameType::keepalive_ack:
      return;
    case FrameType::close:
      return fail(id, make_error_code(MessengerErrc::peer_closed));
    default:
      return fail(id, make_error_code(MessengerErrc::unexpected_frame));
  }
}

void Messenger::Impl::pump(Session& s) {
  Connection* c = s.conn != 0 ? find_connection(s.conn) : nullptr;
  if (c == nullptr || c->state != Connection::State::open) return;
  bool wrote = false;
  while (c->pending_bytes() < options_.write_buffer) {
    const msg::OutMessage* m = s.out->next();
    if (m == nullptr) break;
    const auto header = msg::encode(msg::MessageHeader{m->seq, s.in.in_seq(), 0});
    const msg::Segment segs[2] = {{header, 0}, {m->payload, 0}};
    if (!queue_frame(*c, FrameType::message, segs)) break;
    if (s.out->highest_written() != 0 && msg::seq_at_or_before(m->seq, s.out->highest_written())) {
      hot_.replayed.add_owned();
    }
    s.out->mark_written();
    hot_.sent.add_owned();
    wrote = true;
  }
  if (wrote) s.in.note_ack_sent();  // the ack timer stays: it finds nothing pending
  flush(*c);
}

void Messenger::Impl::send_ack(Connection& c, Session& s) {
  const auto v = msg::encode(msg::Value64{s.in.in_seq()});
  queue_control(c, FrameType::ack, v);
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
    if (ss == nullptr || ss->conn != id || !ss->in.ack_pending()) return;
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
  if (idle > Duration::zero() && now - c->last_rx >= idle) {
    return fail(id, make_error_code(MessengerErrc::idle_timeout));
  }
  const Duration ka = options_.keepalive_interval;
  if (ka > Duration::zero() && now - c->last_tx >= ka && c->pending_bytes() == 0) {
    const auto stamp =
        msg::encode(msg::Value64{static_cast<std::uint64_t>(now.time_since_epoch().count())});
    queue_control(*c, FrameType::keepalive, stamp);
    counters_.counter("msg.keepalives_sent").add_owned();
    c->last_tx = now;  // the keepalive itself: the next is due a full interval from now
    flush(*c);         // may fail and remove the connection
    if (Connection* cc = find_connection(id)) cc->sent_since_tick = false;
  }
}

}  // namespace rmsg
