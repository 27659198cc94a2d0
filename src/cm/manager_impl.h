// The connection manager's insides: the transport-neutral Impl (connection_manager.cc:
// TCP, the tick, counters) and the interface of its RDMA half (rdma_side.cc, built only
// with RMSG_WITH_RDMA). Loop-thread-only.
#pragma once

#include <memory>

#include "cm/connection_limit.h"
#include "cm/manager_stats.h"
#include "rmsg/connection_manager.h"

namespace rmsg::cm {

// The RDMA half: pooled structures, recycling, managed connects and listeners.
class RdmaSide {
 public:
  RdmaSide() = default;
  RdmaSide(const RdmaSide&) = delete;
  RdmaSide& operator=(const RdmaSide&) = delete;
  RdmaSide(RdmaSide&&) = delete;
  RdmaSide& operator=(RdmaSide&&) = delete;
  // Cancels pending connects, destroys idle and recycling structures.
  virtual ~RdmaSide() = default;

  // `lease` (ConnectionLimit) goes with the connection until it is released.
  virtual void connect(const ConnectionParams& params, Lease lease,
                       ConnectionManager::ReportCallback done) = 0;
  // Every connect request takes a lease from `limit` or is rejected. With a `router`,
  // each request is first routed (requests for another manager are handed to it).
  virtual Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                                  AcceptCallback on_accept, AcceptRouter router) = 0;
  // Opens this side's AcceptTarget for requests routed to it (see the public header).
  virtual Result<AcceptTarget> accept_routed(const ConnectionParams& params,
                                             AcceptCallback on_accept) = 0;
  // Step deadlines, recycling deadlines, idle expiry, and (`quiet`: no TCP connect under
  // way) the pool's background chores. True while it has work to watch.
  virtual bool tick(Clock::time_point now, bool quiet) = 0;
  // A TCP connect starts: the pool's chores wait (structure_pool.h).
  virtual void pause() = 0;
  virtual std::size_t idle() const = 0;
  virtual std::size_t recycling() const = 0;
  virtual std::size_t pending() const = 0;
  virtual void drop_idle() = 0;
};

// The RDMA half, or Errc::not_supported in a build without RDMA. `wake_tick` asks the
// manager to (re)start its periodic tick.
Result<std::unique_ptr<RdmaSide>> make_rdma_side(EventLoop& loop,
                                                 const ConnectionManagerOptions& options,
                                                 std::shared_ptr<ManagerStats> stats,
                                                 std::shared_ptr<ConnectionLimit> limit,
                                                 std::function<void()> wake_tick);

}  // namespace rmsg::cm
