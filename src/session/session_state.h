// The named states of a session (one per peer node) and of a connection (one per stream),
// with the only transitions the messenger makes. A state changes only through
// Checked<S>::to(), which validates each step against the table: a refused step is a bug
// of ours (never something a peer did), so a Debug build stops there; a Release build
// leaves the state as it was and returns the error for the caller to report.
//
// Session:
//   idle --> queued | connecting | backoff        (asked for a connection; no slot; later)
//   connecting --> backoff                        (the attempt failed: the next is due)
//   every state --> idle                          (nothing under way; itself included)
//   every state --> open                          (an accepted hello opens it whatever it
//                                                  was doing; open --> open: a newer
//                                                  connection replaced the last)
//   open --> probing --> open                     (an attempt over another transport that
//                                                  replaces the connection make-before-break,
//                                                  docs/messenger.md, Failover; it ends when
//                                                  it opens, fails or gives way)
//
// Connection: connecting --> handshake --> open --> retired (then it is erased).
//   An accepted connection starts in connecting too and enters handshake at once.
//
// Threading: none of its own (the owner's loop thread).
#pragma once

#include <cstdint>

#include "base/debug_assert.h"
#include "rmsg/result.h"

namespace rmsg::session {

enum class SessionState : std::uint8_t {
  idle,        // no connection and no attempt (no address, or nothing asked yet)
  backoff,     // an attempt is due when the session's timer fires
  queued,      // waiting for a handshake slot (max_handshakes)
  connecting,  // our attempt is under way, no connection yet
  open,        // a connection is established
  probing,     // established, and an attempt over another transport is under way
};

enum class ConnState : std::uint8_t {
  connecting,  // outbound: the stream connect is pending (inbound: until the handshake starts)
  handshake,   // banner and hello exchange
  open,        // bound to its session
  // Replaced by a newer connection of its session: read and discarded until the peer closes
  // it or handshake_timeout passes; never delivers.
  retired,
};

constexpr bool valid_transition(SessionState from, SessionState to) noexcept {
  using S = SessionState;
  switch (to) {
    case S::idle:
      return true;
    case S::queued:
    case S::connecting:
      return from == S::idle;
    case S::backoff:
      return from == S::idle || from == S::connecting;
    case S::open:
      return true;
    case S::probing:
      return from == S::open;
  }
  return false;
}

constexpr bool valid_transition(ConnState from, ConnState to) noexcept {
  using C = ConnState;
  switch (to) {
    case C::connecting:
      return false;
    case C::handshake:
      return from == C::connecting;
    case C::open:
      return from == C::handshake;
    case C::retired:
      return from == C::open;
  }
  return false;
}

constexpr const char* state_name(SessionState s) noexcept {
  switch (s) {
    case SessionState::idle:
      return "idle";
    case SessionState::backoff:
      return "backoff";
    case SessionState::queued:
      return "queued";
    case SessionState::connecting:
      return "connecting";
    case SessionState::open:
      return "open";
    case SessionState::probing:
      return "probing";
  }
  return "?";
}

constexpr const char* state_name(ConnState s) noexcept {
  switch (s) {
    case ConnState::connecting:
      return "connecting";
    case ConnState::handshake:
      return "handshake";
    case ConnState::open:
      return "open";
    case ConnState::retired:
      return "retired";
  }
  return "?";
}

// A state that moves only along its table (valid_transition above).
template <class S>
class Checked {
 public:
  constexpr explicit Checked(S initial) noexcept : s_(initial) {}

  constexpr S get() const noexcept { return s_; }
  constexpr bool is(S s) const noexcept { return s_ == s; }

  // Errc::invalid_argument, the state unchanged, when the table has no such step (a Debug
  // build asserts first).
  [[nodiscard]] Result<void> to(S next) noexcept {
    RMSG_DEBUG_ASSERT(valid_transition(s_, next));
    if (!valid_transition(s_, next)) return Errc::invalid_argument;
    s_ = next;
    return {};
  }

 private:
  S s_;
};

}  // namespace rmsg::session
