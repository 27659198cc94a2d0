// The explicit state of an RDMA stream: the connection's, and one per direction (our FIN
// and the peer's). RdmaStream changes ConnState only through one transition function that
// validates and logs each step (stream_setup.cc, RdmaStream::enter).
//
//   connecting --established--> established --fail--> failed --close--> closed
//       |                                                  ^
//       +--fail--> setup_failed ---------close-------------+-------> closed
//   (every state -> closed; closed is final)
//
// A graceful close (a "lingering" state between established/failed and closed, which
// waits for the FIN's completion) is meant to go in as one more ConnState and a TxState
// fin_acked; nothing here assumes that closed follows established directly.
#pragma once

#include <cstdint>

namespace rmsg::rdma {

enum class ConnState : std::uint8_t {
  connecting,    // CM setup under way; no data path yet
  established,   // the data path runs
  setup_failed,  // failed before it was established (the setup callback reports it)
  failed,        // failed after it was established: the error is sticky
  closed,        // close() ran: final
};

// Our direction: shutdown_write() makes it fin_pending, posting the FIN fin_sent.
enum class TxState : std::uint8_t { open, fin_pending, fin_sent };
// The peer's direction: its FIN makes it fin_received (EOF after the queued data); its
// disconnect after that gone (writes get peer_closed).
enum class RxState : std::uint8_t { open, fin_received, gone };

constexpr bool valid_transition(ConnState from, ConnState to) noexcept {
  switch (to) {
    case ConnState::connecting:
      return false;
    case ConnState::established:
    case ConnState::setup_failed:
      return from == ConnState::connecting;
    case ConnState::failed:
      return from == ConnState::established;
    case ConnState::closed:
      return from != ConnState::closed;
  }
  return false;
}

constexpr const char* state_name(ConnState s) noexcept {
  switch (s) {
    case ConnState::connecting:
      return "connecting";
    case ConnState::established:
      return "established";
    case ConnState::setup_failed:
      return "setup_failed";
    case ConnState::failed:
      return "failed";
    case ConnState::closed:
      return "closed";
  }
  return "?";
}

}  // namespace rmsg::rdma
