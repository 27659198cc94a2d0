// ConnectionLimit: the manager's bound on live connections
// (ConnectionManagerOptions::max_connections). Every connection the manager makes or
// accepts holds a Lease (base/lease.h) from the moment it is asked for (connect()) or
// arrives (the RDMA CONNECT_REQUEST, the TCP accept) until it is really released: the
// stream is destroyed, or, for a lingering one, its linger ended. The transports keep the
// lease with whatever outlives the handle (RdmaStream, the TCP linger service), so the
// count includes lingering connections and no lease depends on the caller's handle.
//
// Plain logic, no I/O. A lease may outlive the limit (a stream kept after its manager
// went): it then counts nothing. try_take() is loop-thread-only, like the manager; a lease
// may be released on any thread (an accepted TCP socket routed to another loop keeps its
// lease there), so the count is atomic.
#pragma once

#include <cstddef>
#include <optional>

#include "base/lease.h"

namespace rmsg::cm {

class ConnectionLimit {
 public:
  // `max` 0: no bound (leases are still handed out and counted).
  explicit ConnectionLimit(std::size_t max) : max_(max) {}

  // A lease, or nothing when `max` leases are held already.
  std::optional<Lease> try_take() {
    // Only this thread adds, so the check cannot be overtaken (releases only lower it).
    if (max_ != 0 && count_.live() >= max_) return std::nullopt;
    return count_.take();
  }

  std::size_t live() const noexcept { return count_.live(); }
  std::size_t max() const noexcept { return max_; }

 private:
  std::size_t max_;
  LeaseCount count_;
};

}  // namespace rmsg::cm
