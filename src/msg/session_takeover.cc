// A hello that claims its node restarted (a new client cookie, no server cookie) while the
// session with that node has an open connection. Without authentication anyone can send
// such a hello, and so can a second process given the same node id by mistake: taking it
// at its word would drop a healthy connection and reset its session (review #3). The old
// connection decides instead. It gets a keepalive with a stamp of its own, and the hello
// waits, unanswered:
//   - the stamp comes back: the holder is alive; the hello is refused (a close frame with
//     reason duplicate_node; counted msg.duplicate_node and logged as a warning);
//   - the old connection fails or closes (a process killed with -9: its kernel resets it
//     as soon as the probe reaches it): the hello is decided again at once, now as the
//     restart it is;
//   - nothing within handshake_timeout / 4 (the old connection is half-open: its host is
//     gone): the old connection is closed (idle_timeout) and the hello accepted likewise.
// One probe at a time per session: another such hello meanwhile is closed unanswered (its
// sender retries after its backoff).
#include <utility>

#include "msg/messenger_impl.h"
#include "rmsg/log.h"

namespace rmsg {

using msg::FrameType;

bool Messenger::Impl::hold_for_probe(Connection& c, Session& s, const msg::Hello& h,
                                     bool reconnect) {
  Connection* old = s.conn() != 0 ? find_connection(s.conn()) : nullptr;
  if (old == nullptr || old->state() != Connection::State::open || old->id == c.id) return false;
  if (old->probe_for != 0) {
    counters_.counter("msg.takeover.busy").add_owned();
    drop(c.id, false);
    return true;
  }
  counters_.counter("msg.takeover.probes").add_owned();
  c.held = h;
  c.held_reconnect = reconnect;
  old->probe_for = c.id;
  old->probe_stamp = loop_.random().next() | 1;  // never 0, and no clock reading
  std::weak_ptr<Impl> weak = weak_from_this();
  const ConnId old_id = old->id;
  old->probe_timer = loop_.add_timer(options_.handshake_timeout / 4, [weak, old_id] {
    auto self = weak.lock();
    if (!self) return;
    if (Connection* o = self->find_connection(old_id)) o->probe_timer = 0;
    self->fail(old_id, make_error_code(MessengerErrc::idle_timeout));  // half-open
  });
  const auto stamp = msg::encode(msg::Value64{old->probe_stamp});
  old->queue_control(FrameType::keepalive, stamp);
  flush(*old);  // may fail it at once (a reset connection): then the hello goes on
  return true;
}

void Messenger::Impl::probe_answered(Connection& old, std::uint64_t stamp) {
  if (old.probe_for == 0 || stamp != old.probe_stamp) return;
  const ConnId held = old.probe_for;
  old.probe_for = 0;
  if (old.probe_timer != 0) loop_.cancel_timer(old.probe_timer);
  old.probe_timer = 0;
  counters_.counter("msg.duplicate_node").add_owned();
  RMSG_LOG(warn,
           "msg: node %llx: a hello from node %llx claims a restart while that node's "
           "connection answers: refused (a duplicate node id?)",
           static_cast<unsigned long long>(options_.node_id),
           static_cast<unsigned long long>(old.peer));
  Connection* c = find_connection(held);
  if (c == nullptr) return;
  const auto reason = msg::encode(msg::Reason{msg::CloseReason::duplicate_node});
  c->queue_control(FrameType::close, reason);
  flush(*c);
  count_error(make_error_code(MessengerErrc::duplicate_node));
  drop(held, true);
}

void Messenger::Impl::probe_ended(Connection& old) {
  if (old.probe_timer != 0) loop_.cancel_timer(old.probe_timer);
  old.probe_timer = 0;
  if (old.probe_for == 0) return;
  const ConnId held = old.probe_for;
  old.probe_for = 0;
  // After the caller has told the session its connection is gone.
  std::weak_ptr<Impl> weak = weak_from_this();
  loop_.defer([weak, held] {
    if (auto self = weak.lock()) self->resume_held(held);
  });
}

void Messenger::Impl::resume_held(ConnId id) {
  Connection* c = find_connection(id);
  if (c == nullptr || !c->held) return;
  const msg::Hello h = *c->held;
  c->held.reset();
  on_hello(*c, h, c->held_reconnect);
}

}  // namespace rmsg
