// Transport policies (include/rmsg/messenger.h, TransportPolicy): which transport a
// session's connects use, the fallback to TCP when RDMA fails, and the probes that move an
// rdma_preferred session back to RDMA make-before-break. The order of a switch, and why it
// loses and doubles nothing: docs/messenger.md, "Failover". Nothing here is on the wire: a
// probe is an ordinary session_reconnect handshake on another stream.
#include <utility>

#include "msg/messenger_impl.h"
#include "rmsg/log.h"

namespace rmsg {

Result<void> Messenger::Impl::add_peer(NodeId peer, const PeerAddresses& addresses) {
  if (peer == 0 || peer == options_.node_id) return make_error_code(Errc::invalid_argument);
  PeerAddresses a = addresses;
  a.rdma.transport = Transport::rdma;
  a.tcp.transport = Transport::tcp;
  peers_[peer] = a.policy == TransportPolicy::tcp_only ? a.tcp : a.rdma;
  routes_[peer] = std::move(a);
  if (Session* s = find_session(peer); s != nullptr && s->out().size() > 0) want_connection(*s);
  return {};
}

TransportPolicy Messenger::Impl::transport_policy(const Session& s) const {
  auto it = routes_.find(s.peer);
  if (it != routes_.end()) return it->second.policy;
  // One address (add_peer(ConnectionParams)): that transport only.
  auto p = peers_.find(s.peer);
  return p != peers_.end() && p->second.transport == Transport::tcp ? TransportPolicy::tcp_only
                                                                    : TransportPolicy::rdma_only;
}

const ConnectionParams& Messenger::Impl::attempt_params(Session& s, Connection& c) {
  auto it = routes_.find(s.peer);
  if (it == routes_.end()) {
    const ConnectionParams& p = peers_.at(s.peer);
    c.transport = p.transport;
    s.fo.attempt = p.transport;
    return p;
  }
  const bool probe = s.state() == Session::State::probing;
  const Transport t = probe ? Transport::rdma : msg::next_transport(it->second.policy, s.fo);
  if (probe) s.fo.probe = c.id;
  c.transport = t;
  s.fo.attempt = t;
  return t == Transport::rdma ? it->second.rdma : it->second.tcp;
}

bool Messenger::Impl::failover_on_loss(Session& s, std::error_code why) {
  s.fo.cause = why;
  if (s.fo.probe_timer != 0) loop_.cancel_timer(s.fo.probe_timer);
  s.fo.probe_timer = 0;
  if (s.outbound() != 0) {
    // A probe is under way: it is the reconnect now (its hello asked for what we have).
    s.fo.probe = 0;
    enter(s, Session::State::connecting);
    return true;
  }
  if (transport_policy(s) != TransportPolicy::rdma_preferred || s.fo.current != Transport::rdma ||
      !routes_.contains(s.peer)) {
    return false;
  }
  s.fo.on_tcp = true;  // the first fallback waits no backoff
  schedule_attempt(s, Duration::zero());
  return true;
}

bool Messenger::Impl::failover_attempt_failed(Session& s, std::error_code why) {
  if (s.fo.probe != 0 && s.fo.probe == s.outbound()) {
    end_attempt(s);
    s.fo.probe = 0;
    counters_.counter("msg.probe_failures").add_owned();
    RMSG_LOG(debug, "msg: node %llx: RDMA probe to %llx failed: %s",
             static_cast<unsigned long long>(options_.node_id),
             static_cast<unsigned long long>(s.peer), why.message().c_str());
    if (s.state() == Session::State::open) arm_probe(s);
    return true;
  }
  if (s.state() != Session::State::connecting ||
      transport_policy(s) != TransportPolicy::rdma_preferred) {
    return false;
  }
  if (s.fo.attempt == Transport::tcp) {
    s.fo.on_tcp = false;  // both failed: the next attempt, after backoff, tries RDMA first
    return false;
  }
  // RDMA could not be set up: TCP at once.
  end_attempt(s);
  s.fo.on_tcp = true;
  s.fo.cause = why;
  counters_.counter("msg.connect_failures").add_owned();
  emit(SessionEvent{SessionEvent::Kind::failed, s.peer, why, {}, {}});
  schedule_attempt(s, Duration::zero());
  return true;
}

bool Messenger::Impl::probe_gave_way(Session& s) {
  if (s.fo.probe == 0) return false;
  s.fo.probe = 0;  // the peer's own attempt is on its way to us
  if (s.state() == Session::State::open) arm_probe(s);
  return true;
}

void Messenger::Impl::transport_opened(Session& s, Connection& c) {
  const bool probed = s.fo.probe != 0 && s.fo.probe == c.id;
  s.fo.probe = 0;
  if (s.fo.probe_timer != 0) loop_.cancel_timer(s.fo.probe_timer);
  s.fo.probe_timer = 0;
  const bool switched = s.fo.ever && s.fo.current != c.transport;
  s.fo.current = c.transport;
  s.fo.ever = true;
  if (c.transport == Transport::rdma) {
    s.fo.on_tcp = false;
    if (probed) s.fo.probe_backoff.reset();
  }
  if (switched) {
    const std::error_code cause = probed ? make_error_code(MessengerErrc::replaced) : s.fo.cause;
    counters_
        .counter(c.transport == Transport::tcp ? "msg.switches.to_tcp" : "msg.switches.to_rdma")
        .add_owned();
    // Everything written before and not acknowledged goes again on this connection.
    const msg::Seq written = s.out().highest_written();
    if (written > s.out().acked()) {
      counters_.counter("msg.replayed_across_switch").add_owned(written - s.out().acked());
    }
    RMSG_LOG(info, "msg: node %llx: session with %llx now over %s (%s)",
             static_cast<unsigned long long>(options_.node_id),
             static_cast<unsigned long long>(s.peer), to_string(c.transport),
             cause.message().c_str());
    SessionEvent e{SessionEvent::Kind::switched, s.peer, cause, {}, {}};
    e.transport = c.transport;
    e.time = loop_.now();
    emit(std::move(e));
  }
  if (msg::wants_probe(transport_policy(s), s.fo) && routes_.contains(s.peer)) arm_probe(s);
}

void Messenger::Impl::arm_probe(Session& s) {
  if (s.fo.probe_timer != 0 || shutting_down_) return;
  std::weak_ptr<Impl> weak = weak_from_this();
  const NodeId peer = s.peer;
  s.fo.probe_timer = loop_.add_timer(s.fo.probe_backoff.next(loop_.random()), [weak, peer] {
    if (auto self = weak.lock()) self->probe_due(peer);
  });
}

void Messenger::Impl::probe_due(NodeId peer) {
  Session* s = find_session(peer);
  if (s == nullptr) return;
  s->fo.probe_timer = 0;
  if (shutting_down_ || !s->connected() || !routes_.contains(peer) ||
      !msg::wants_probe(transport_policy(*s), s->fo)) {
    return;
  }
  if (handshakes_ >= options_.max_handshakes || s->outbound() != 0) {
    arm_probe(*s);  // no slot (or an attempt under way) now: later, as if this one failed
    return;
  }
  counters_.counter("msg.probes").add_owned();
  start_attempt(*s);  // open: the attempt is a probe over RDMA (attempt_params)
}

// The acceptor's side of a replacement: the old connection delivers nothing from here on
// (frames read are discarded), so two connections never deliver into one session; it is
// not closed at once either, so the peer learns of the switch from the welcome on the new
// connection, not from a reset racing it, and closes the old one itself (a probe's
// make-before-break: the peer's session sees no disconnect).
void Messenger::Impl::retire(ConnId id) {
  Connection* c = find_connection(id);
  if (c == nullptr) return;
  enter(*c, Connection::State::retired);
  c->cancel_timers(loop_);
  std::weak_ptr<Impl> weak = weak_from_this();
  c->deadline = loop_.add_timer(options_.handshake_timeout, [weak, id] {
    if (auto self = weak.lock()) {
      if (Connection* cc = self->find_connection(id)) cc->deadline = 0;
      self->drop(id, false);
    }
  });
}

}  // namespace rmsg
