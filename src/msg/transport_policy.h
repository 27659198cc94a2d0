// A session's transport state under its TransportPolicy (include/rmsg/messenger.h):
// which transport its next connect uses, whether it runs on the TCP fallback, and its
// RDMA probe. The driver is session_failover.cc; the order of a switch and why it loses
// and doubles nothing: docs/messenger.md, "Failover".
//
// Threading: none (the session's loop thread).
#pragma once

#include <cstdint>
#include <system_error>

#include "msg/vocabulary.h"
#include "rmsg/connection_manager.h"
#include "rmsg/event_loop.h"
#include "rmsg/messenger.h"
#include "session/backoff.h"

namespace rmsg::msg {

struct FailoverState {
  // rdma_preferred: regular connects go over TCP (an RDMA connection failed or could not
  // be made); a successful probe clears it, a failed TCP connect too (the next attempt
  // tries RDMA first again).
  bool on_tcp = false;
  Transport attempt = Transport::tcp;  // of the connect under way (s.outbound)
  Transport current = Transport::tcp;  // of the connection opened last
  bool ever = false;                   // `current` names a connection
  std::error_code cause;               // what ended the previous connection
  std::uint64_t probe = 0;             // the ConnId of the probe under way (0: none)
  TimerId probe_timer = 0;             // the next probe, while open on TCP
  Backoff probe_backoff{BackoffPolicy{}};
};

// The transport of a session's next regular connect (a probe always uses RDMA).
inline Transport next_transport(TransportPolicy policy, const FailoverState& f) noexcept {
  switch (policy) {
    case TransportPolicy::rdma_only:
      return Transport::rdma;
    case TransportPolicy::tcp_only:
      return Transport::tcp;
    case TransportPolicy::rdma_preferred:
      break;
  }
  return f.on_tcp ? Transport::tcp : Transport::rdma;
}

// Whether a session in this state probes RDMA (it is open on TCP and prefers RDMA).
inline bool wants_probe(TransportPolicy policy, const FailoverState& f) noexcept {
  return policy == TransportPolicy::rdma_preferred && f.ever && f.current == Transport::tcp;
}

}  // namespace rmsg::msg
