// The explicit state of an RDMA stream: the connection's, and one per direction (our FIN
// and the peer's). RdmaStream changes ConnState only through one transition function that
// validates and logs each step (stream_setup.cc, RdmaStream::enter).
//
//   connecting --established--> established --fail--> failed --close--> closed
//       |                          |                       ^
//       +--fail--> setup_failed ---|-----close-------------+-------> closed
//                                  +--close after shutdown_write()--> lingering --> closed
//   (every state -> closed; closed is final)
//
// lingering: close() ran after shutdown_write(); the loop owns the stream until the FIN's
// send completion (tx fin_acked: the peer's transport has every byte and the FIN), an
// error, the linger timeout or the loop's destruction, then it goes to closed.
#pragma once

#include <cstdint>

namespace rmsg::rdma {

enum class ConnState : std::uint8_t {
  connecting,    // CM setup under way; no data path yet
  established,   // the data path runs
  setup_failed,  // failed before it was established (the setup callback reports it)
  failed,        // failed after it was established: the error is sticky
  lingering,     // close() after shutdown_write(): delivering the rest and the FIN
  closed,        // close() ran: final
};

// Our direction: shutdown_write() makes it fin_pending, posting the FIN fin_sent, the
// FIN's (always signalled) send completion fin_acked.
enum class TxState : std::uint8_t { open, fin_pending, fin_sent, fin_acked };
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
    case ConnState::lingering:
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
    case ConnState::lingering:
      return "lingering";
    case ConnState::closed:
      return "closed";
  }
  return "?";
}

}  // namespace rmsg::rdma
