// Why a messenger's connection or session ended: MessengerErrc, its category
// ("rmsg.messenger"). Part of rmsg/messenger.h's contract (its Errors paragraph); a header
// of its own because the session logic below the messenger produces these codes too.
#pragma once

#include <system_error>

#include "rmsg/export.h"

namespace rmsg {

// Why a connection or a session ended (stable values; counters name them).
// rmsg::is_retryable: true for the resets (peer_restarted, session_unknown, lossy_fault,
// session_expired: a message sent again starts a new session) and for a lost connection
// (handshake_timeout, replaced, peer_closed, idle_timeout, not_reading: a later
// connection may work); false for a peer that is broken or not the one expected, and for
// shutdown. rmsg::error_kind: the resets session_reset, a lost connection connection_lost
// (handshake_timeout: timeout), wrong_node and duplicate_node rejected, a broken peer's
// codes protocol, shutdown shutting_down.
enum class MessengerErrc {
  peer_restarted = 1,     // reset: the peer presents a new session (it restarted)
  session_unknown = 2,    // reset: the peer does not know our session (it restarted)
  lossy_fault = 3,        // reset: a lossy session's connection was lost
  wrong_node = 4,         // the node at that address is not the one expected
  handshake_timeout = 5,  // no session established within handshake_timeout
  unexpected_frame = 6,   // a frame type not allowed in the connection's state
  sequence_gap = 7,       // a message number skipped (the peer is broken)
  bad_ack = 8,            // an ack of a message never sent (the peer is broken)
  bad_payload = 9,        // a control frame's payload is malformed
  replaced = 10,          // the session moved to a newer connection
  peer_closed = 11,       // the peer closed the connection (a close frame or EOF)
  shutdown = 12,          // this messenger shut down or mark_down() dropped the session
  idle_timeout = 13,      // nothing received for idle_timeout (a half-open connection)
  bad_fragment = 14,      // a malformed fragment sequence (docs/protocol.md, fragments)
  // reset: the session had no connection for session_expiry, or it was the oldest such
  // session when max_sessions was reached (the peer is taken to be gone for good; a peer
  // that comes back later starts a new session)
  session_expired = 15,
  not_reading = 16,     // the peer does not read our answers (past write_buffer)
  duplicate_node = 17,  // refused: the node id has a healthy session with another cookie
};
RMSG_EXPORT const std::error_category& messenger_category() noexcept;
inline std::error_code make_error_code(MessengerErrc e) noexcept {
  return {static_cast<int>(e), messenger_category()};
}

}  // namespace rmsg

template <>
struct std::is_error_code_enum<rmsg::MessengerErrc> : std::true_type {};
