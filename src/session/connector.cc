#include "session/connector.h"

#include "rmsg/messenger_errors.h"

namespace rmsg::session {
namespace {

Reaction failed(MessengerErrc e) noexcept {
  return {Reaction::Kind::failed, make_error_code(e), {}};
}

}  // namespace

Reaction react(FrameType type, std::span<const std::byte> payload, AttemptNumbers& n) {
  using K = Reaction::Kind;
  switch (type) {
    case FrameType::server_ident:
    case FrameType::session_reconnect_ok: {
      auto w = decode_welcome(payload);
      if (!w) return failed(MessengerErrc::bad_payload);
      if (w->node != n.target) return failed(MessengerErrc::wrong_node);
      // A reconnect is accepted only under the cookie we named, with the number we asked.
      if (w->cookie == 0 || (n.peer_cookie != 0 && w->cookie != n.peer_cookie) ||
          w->connect_seq != n.attempt_cs ||
          (type == FrameType::session_reconnect_ok) != (n.peer_cookie != 0)) {
        return failed(MessengerErrc::bad_payload);
      }
      n.peer_cookie = w->cookie;
      n.connect_seq = w->connect_seq;
      return {K::established, {}, w.value()};
    }
    case FrameType::session_retry: {
      auto v = decode_value64(payload);
      if (!v) return failed(MessengerErrc::bad_payload);
      n.connect_seq = seq_max(n.connect_seq, v->value);
      return {K::send_hello, {}, {}};
    }
    case FrameType::session_retry_global: {
      auto v = decode_value64(payload);
      if (!v) return failed(MessengerErrc::bad_payload);
      n.global_seq = seq_max(n.global_seq, v->value);
      return {K::send_hello, {}, {}};
    }
    case FrameType::wait:
      // Bumped, so that if the peer's attempt never arrives, our next beats an equal one.
      n.connect_seq = seq_max(n.connect_seq, n.attempt_cs);
      return {K::give_way, {}, {}};
    case FrameType::session_reset:
      return {K::reset_session, {}, {}};
    case FrameType::close: {
      auto r = decode_reason(payload);
      if (r && r->reason == CloseReason::wrong_node) return failed(MessengerErrc::wrong_node);
      if (r && r->reason == CloseReason::duplicate_node) {
        return failed(MessengerErrc::duplicate_node);
      }
      return failed(MessengerErrc::peer_closed);
    }
    default:
      return failed(MessengerErrc::unexpected_frame);
  }
}

}  // namespace rmsg::session
