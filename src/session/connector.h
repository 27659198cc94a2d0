// The connector's half of the handshake as pure logic: what an answer to our hello means
// for the attempt and the session's numbers (docs/messenger.md, "The handshake"). The
// acceptor's half is reconnect_decision.h. No I/O: the driver (session_handshake.cc) acts
// on the Reaction.
//
// Threading: pure.
#pragma once

#include <cstdint>
#include <span>
#include <system_error>

#include "session/vocabulary.h"
#include "wire/frame_types.h"
#include "wire/session_frames.h"

namespace rmsg::session {

// The numbers an attempt reads and updates.
struct AttemptNumbers {
  NodeId target = 0;              // the node we connected to
  Cookie peer_cookie = 0;         // the session's cookie for the peer (0: unknown)
  std::uint64_t connect_seq = 0;  // the session's (last established, or bumped)
  std::uint64_t global_seq = 0;   // the messenger's attempt counter
  std::uint64_t attempt_cs = 0;   // what our last hello asked for
};

struct Reaction {
  enum class Kind : std::uint8_t {
    established,    // welcome: the session is on this connection (welcome has the numbers)
    send_hello,     // retry / retry_global: a new hello on this connection
    give_way,       // wait: close this connection, the peer's attempt wins
    reset_session,  // session_reset: our session is gone; reset it, then a new hello
    failed,         // close the connection with `error`
  };
  Kind kind = Kind::failed;
  std::error_code error;
  Welcome welcome;
};

// Applies `type`/`payload` (an answer received in the handshake) to `n`: connect_seq and
// global_seq as the decision order's connector rules say (retry: max with the value;
// retry_global likewise; wait: bumped to the attempt's; welcome: the established one).
Reaction react(FrameType type, std::span<const std::byte> payload, AttemptNumbers& n);

}  // namespace rmsg::session
