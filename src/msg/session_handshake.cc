// The handshake, both roles: banner and hello out, the acceptor's decision
// (reconnect_decision.h) and its answer, the connector's reaction to each answer, and the
// moment a connection becomes its session's (open_session). docs/messenger.md walks
// through it; docs/protocol.md has the bytes.
#include <utility>

#include "auth/auth_errors.h"
#include "msg/messenger_impl.h"
#include "msg/vocabulary.h"
#include "rmsg/log.h"
#include "session/connector.h"

namespace rmsg {

using msg::FrameType;

void Messenger::Impl::on_connected(ConnId id, Result<Stream> r) {
  Connection* c = find_connection(id);
  if (c == nullptr) return;  // abandoned meanwhile: `r`'s stream closes here
  if (!r) {
    fail(id, r.error());
    return;
  }
  c->stream = std::move(r).value();
  RMSG_LOG(debug, "msg: node %llx: connection %llu: %s stream connected",
           static_cast<unsigned long long>(options_.node_id), static_cast<unsigned long long>(id),
           to_string(c->transport));
  begin_handshake(*c);
}

void Messenger::Impl::on_accepted(Stream stream, Transport transport) {
  if (shutting_down_) return;
  // max_inbound_handshakes: an unauthenticated peer holds a connection for at most
  // handshake_timeout, and only so many at once; the one waiting longest gives way.
  const std::size_t cap = options_.max_inbound_handshakes;
  if (cap != 0 && inbound_handshakes_.size() >= cap) {
    counters_.counter("msg.handshake.evicted").add_owned();
    RMSG_LOG(debug, "msg: node %llx: %zu inbound handshakes: closing the oldest",
             static_cast<unsigned long long>(options_.node_id), inbound_handshakes_.size());
    drop(inbound_handshakes_.front(), false);
  }
  Connection& c = new_connection(Connection::Role::inbound);
  c.counted_inbound = true;
  c.inbound_pos = inbound_handshakes_.insert(inbound_handshakes_.end(), c.id);
  c.stream = std::move(stream);
  c.transport = transport;
  counters_.counter("msg.accepts").add_owned();
  std::weak_ptr<Impl> weak = weak_from_this();
  const ConnId id = c.id;
  RMSG_LOG(debug, "msg: node %llx: connection %llu: accepted over %s",
           static_cast<unsigned long long>(options_.node_id), static_cast<unsigned long long>(id),
           to_string(transport));
  c.deadline = loop_.add_timer(options_.handshake_timeout, [weak, id] {
    if (auto self = weak.lock()) {
      if (Connection* cc = self->find_connection(id)) cc->deadline = 0;
      self->fail(id, make_error_code(MessengerErrc::handshake_timeout));
    }
  });
  begin_handshake(c);
}

void Messenger::Impl::handshake_done(Connection& c) {
  if (!c.counted_inbound) return;
  c.counted_inbound = false;
  inbound_handshakes_.erase(c.inbound_pos);
}

void Messenger::Impl::begin_handshake(Connection& c) {
  enter(c, Connection::State::handshake);
  // borrow: consume() handles each frame before the bytes it read change (connection_io.cc),
  // so a small frame is not copied out of the read buffer.
  const auto banner = local_banner(c);  // session_auth.cc: with auth, its offer and nonce
  msg::Banner local;  // what the peer's banner is negotiated against: ours, as sent
  if (c.auth) {
    local.supported = msg::kFeatureAuthenticated;
    if (options_.auth == AuthPolicy::require) local.required = msg::kFeatureAuthenticated;
  }
  c.decoder.emplace(msg::DecoderOptions{.local = local, .limits = frame_limits_, .borrow = true});
  c.queue_bytes(banner);
  const ConnId id = c.id;
  watch(c);
  if (c.role == Connection::Role::outbound) {
    Session* s = find_session(c.peer);
    if (s == nullptr || s->outbound() != id) {
      drop(id, false);
      return;
    }
    // Pipelined behind the banner (no round trip spent), unless we offer authentication:
    // then it waits for the peer's banner and follows our proof (on_banner).
    if (!keys_) return send_hello(c, *s);
    flush(c);
  } else {
    flush(c);
  }
}

void Messenger::Impl::send_hello(Connection& c, Session& s) {
  msg::Hello h{.node = options_.node_id,
               .target = c.peer,
               .client_cookie = s.my_cookie(),
               .server_cookie = s.peer_cookie,
               .global_seq = ++global_seq_,
               .connect_seq = s.connect_seq + 1,
               .msg_seq = s.in.in_seq(),
               .flags = s.policy == SessionPolicy::lossy ? msg::kFlagLossy : 0};
  c.attempt_cs = h.connect_seq;
  const auto bytes = msg::encode(h);
  c.queue_control(s.peer_cookie != 0 ? FrameType::session_reconnect : FrameType::client_ident,
                  bytes);
  flush(c);
}

void Messenger::Impl::on_handshake_frame(Connection& c, msg::Frame& f) {
  const ConnId id = c.id;
  const auto payload = f.segment(0);
  if (f.type() == FrameType::auth_proof) return on_auth_proof(c, f);         // session_auth.cc
  if (c.auth) return fail(id, make_error_code(auth::AuthErrc::unexpected));  // proof first
  if (c.role == Connection::Role::inbound) {
    if (c.held ||
        (f.type() != FrameType::client_ident && f.type() != FrameType::session_reconnect)) {
      fail(id, make_error_code(MessengerErrc::unexpected_frame));
      return;
    }
    auto h = msg::decode_hello(payload);
    if (!h) return fail(id, make_error_code(MessengerErrc::bad_payload));
    on_hello(c, h.value(), f.type() == FrameType::session_reconnect);
    return;
  }
  Session* s = find_session(c.peer);
  if (s == nullptr || s->outbound() != id) return drop(id, false);
  msg::AttemptNumbers n{c.peer, s->peer_cookie, s->connect_seq, global_seq_, c.attempt_cs};
  const msg::Reaction r = msg::react(f.type(), payload, n);
  s->connect_seq = n.connect_seq;
  global_seq_ = n.global_seq;
  using K = msg::Reaction::Kind;
  switch (r.kind) {
    case K::established:
      s->peer_cookie = n.peer_cookie;
      if ((r.welcome.flags & msg::kFlagLossy) != 0) s->policy = SessionPolicy::lossy;
      open_session(c, *s, r.welcome.msg_seq);
      return;
    case K::send_hello:
      counters_
          .counter(f.type() == FrameType::session_retry ? "msg.handshake.retry"
                                                        : "msg.handshake.retry_global")
          .add_owned();
      send_hello(c, *s);
      return;
    case K::give_way:
      // The peer's attempt wins; ours closes and the fallback waits the longest backoff.
      counters_.counter("msg.handshake.wait").add_owned();
      end_attempt(*s);
      drop(id, true);
      if (probe_gave_way(*s)) return;
      schedule_attempt(*s, s->backoff.longest(loop_.random()));
      return;
    case K::reset_session:
      // The peer does not know our session (it restarted): ours ends; start afresh here.
      counters_.counter("msg.handshake.reset").add_owned();
      reset_session(*s, make_error_code(MessengerErrc::session_unknown), true);
      send_hello(c, *s);
      return;
    case K::failed:
      fail(id, r.error);
      return;
  }
}

void Messenger::Impl::on_hello(Connection& c, const msg::Hello& h, bool reconnect) {
  const ConnId id = c.id;
  if (h.target != 0 && h.target != options_.node_id) {
    const auto reason = msg::encode(msg::Reason{msg::CloseReason::wrong_node});
    c.queue_control(FrameType::close, reason);
    flush(c);
    count_error(make_error_code(MessengerErrc::wrong_node));
    drop(id, true);
    return;
  }
  if (h.node == 0 || h.node == options_.node_id || reconnect != (h.server_cookie != 0) ||
      h.client_cookie == 0 || (c.peer != 0 && c.peer != h.node)) {
    return fail(id, make_error_code(MessengerErrc::bad_payload));
  }
  // Authenticated: the hello speaks for the node that proved itself, no other; else the
  // node must be one that may come without proof (session_auth.cc).
  if (c.authenticated != 0 ? h.node != c.authenticated : must_authenticate(h.node)) {
    return fail(id, make_error_code(c.authenticated != 0 ? auth::AuthErrc::wrong_peer
                                                         : auth::AuthErrc::not_offered));
  }
  if (owns_ && !owns_(h.node)) {
    if (relay(c, h.node)) return;
    counters_.counter("msg.accepts.wrong_loop").add_owned();
    drop(id, true);
    return;
  }
  c.transcript = {};
  c.peer = h.node;
  Session* s = find_session(h.node);
  msg::SessionView v;
  if (s != nullptr) {
    Connection* out = s->outbound() != 0 ? find_connection(s->outbound()) : nullptr;
    v = {.exists = true,
         .my_cookie = s->my_cookie(),
         .peer_cookie = s->peer_cookie,
         .peer_global_seq = s->peer_global_seq,
         .connect_seq = s->connect_seq,
         .outbound = out != nullptr,
         .outbound_connect_seq = out != nullptr ? out->attempt_cs : 0,
         .client_cookie_retired = s->peer_cookie_retired(h.client_cookie)};
  }
  const msg::Decision d = msg::decide(v, h, options_.node_id);
  // Answers other than accept count against the write buffer: a peer that asks again and
  // again without reading them is not a connector (review #23).
  if (d.kind != msg::Decision::Kind::accept && c.pending_bytes() >= options_.write_buffer) {
    return fail(id, make_error_code(MessengerErrc::not_reading));
  }
  RMSG_LOG(debug, "msg: node %llx: hello from %llx gs %llu cs %llu: %s",
           static_cast<unsigned long long>(options_.node_id),
           static_cast<unsigned long long>(h.node), static_cast<unsigned long long>(h.global_seq),
           static_cast<unsigned long long>(h.connect_seq), d.why);
  using K = msg::Decision::Kind;
  switch (d.kind) {
    case K::accept:
      // A restart claimed while the session's connection is open: that connection decides
      // (session_takeover.cc).
      if (d.reset_local && s != nullptr && hold_for_probe(c, *s, h, reconnect)) return;
      if (s == nullptr && !room_for_session()) {  // max_sessions, and none to evict
        counters_.counter("msg.sessions_refused").add_owned();
        return drop(id, false);
      }
      accept_hello(c, s != nullptr ? *s : session_for(h.node), h, d);
      return;
    case K::reset: {
      counters_.counter("msg.decisions.reset").add_owned();
      const auto r = msg::encode(msg::Reason{msg::CloseReason::unknown_session});
      c.queue_control(FrameType::session_reset, r);
      break;
    }
    case K::retry: {
      counters_.counter("msg.decisions.retry").add_owned();
      s->peer_global_seq = msg::seq_max(s->peer_global_seq, h.global_seq);
      const auto r = msg::encode(msg::Value64{d.value});
      c.queue_control(FrameType::session_retry, r);
      break;
    }
    case K::retry_global: {
      counters_.counter("msg.decisions.retry_global").add_owned();
      const auto r = msg::encode(msg::Value64{d.value});
      c.queue_control(FrameType::session_retry_global, r);
      break;
    }
    case K::wait: {
      counters_.counter("msg.decisions.wait").add_owned();
      s->peer_global_seq = msg::seq_max(s->peer_global_seq, h.global_seq);
      const auto r = msg::encode(msg::Value64{d.value});
      c.queue_control(FrameType::wait, r);
      break;
    }
  }
  flush(c);
}

void Messenger::Impl::accept_hello(Connection& c, Session& s, const msg::Hello& h,
                                   const msg::Decision& d) {
  counters_.counter("msg.decisions.accept").add_owned();
  if (d.reset_local) {
    s.retire_peer_cookie(s.peer_cookie);
    if (s.conn() != 0) drop(s.conn(), false);
    s.lose_connection();
    reset_session(s, make_error_code(MessengerErrc::peer_restarted), true);
  }
  if (d.drop_outbound) counters_.counter("msg.decisions.race_lost").add_owned();
  if (s.outbound() != 0 && (d.drop_outbound || d.reset_local)) {
    drop(s.outbound(), false);
    end_attempt(s);
  }
  if (s.conn() != 0 && s.conn() != c.id) {
    counters_.counter("msg.replaced").add_owned();
    retire(s.conn());  // delivers nothing more from now on; the peer closes it
    s.lose_connection();
    s.out().rewind();
  }
  if (s.timer != 0) {
    loop_.cancel_timer(s.timer);
    s.timer = 0;
  }
  s.peer_cookie = h.client_cookie;
  s.peer_global_seq = h.global_seq;
  s.connect_seq = h.connect_seq;
  if ((h.flags & msg::kFlagLossy) != 0) s.policy = SessionPolicy::lossy;
  const msg::Welcome w{.node = options_.node_id,
                       .cookie = s.my_cookie(),
                       .connect_seq = s.connect_seq,
                       .msg_seq = s.in.in_seq(),
                       .flags = s.policy == SessionPolicy::lossy ? msg::kFlagLossy : 0};
  const auto bytes = msg::encode(w);
  c.queue_control(h.server_cookie == 0 ? FrameType::server_ident : FrameType::session_reconnect_ok,
                  bytes);
  open_session(c, s, h.msg_seq);
}

void Messenger::Impl::open_session(Connection& c, Session& s, msg::Seq peer_delivered) {
  if (!s.out().ack(peer_delivered)) return fail(c.id, make_error_code(MessengerErrc::bad_ack));
  if (s.conn() != 0 && s.conn() != c.id) {  // a probe's welcome: the old connection goes now
    counters_.counter("msg.replaced").add_owned();
    RMSG_LOG(debug, "msg: node %llx: connection %llu replaced by %llu: closing it",
             static_cast<unsigned long long>(options_.node_id),
             static_cast<unsigned long long>(s.conn()), static_cast<unsigned long long>(c.id));
    drop(s.conn(), false);
    s.lose_connection();
  }
  s.out().rewind();  // the peer has everything up to peer_delivered; the rest goes again
  note_room(s);
  c.reasm.emplace(options_.max_message_size, s.in.in_seq());
  if (c.deadline != 0) loop_.cancel_timer(c.deadline);
  c.deadline = 0;
  release_slot(c);
  handshake_done(c);
  enter(c, Connection::State::open);
  start_keepalive(c);
  if (s.outbound() == c.id) end_attempt(s);
  s.use_connection(c.id);
  enter(s, Session::State::open);
  note_connected(s);
  s.ever_open = true;
  s.backoff.reset();
  counters_.counter("msg.opened").add_owned();
  emit(SessionEvent{SessionEvent::Kind::connected, s.peer, {}, {}, {}});
  transport_opened(s, c);
  pump(s);
}

}  // namespace rmsg
