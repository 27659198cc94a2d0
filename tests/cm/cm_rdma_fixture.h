// Fixture for connection-manager tests on real verbs (Soft-RoCE guest; RdmaTest fails
// without RMSG_RDMA_ADDR or an active device). Client and server share one loop thread.
#pragma once

#include <deque>
#include <memory>
#include <optional>

#include "kit/rdma_fixture.h"
#include "kit/verbs_census.h"
#include "rmsg/connection_manager.h"

namespace rmsg::testing {

class CmRdmaTest : public RdmaTest {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The manager (re)created with `options`.
  void make_manager(const ConnectionManagerOptions& options);
  ConnectionManager& cm() { return *manager_; }
  // Params to peer_ with test options (rnr_retry 0).
  ConnectionParams params() const;
  // A managed listener (pooled passive side) on the test address; sets peer_.
  void listen_managed(const ConnectionParams& server);
  // Connects and drives the loop until the result; fails the test on timeout.
  Result<Stream> connect_one(const ConnectionParams& p, ConnectReport* report = nullptr);
  // Connects and takes the matching accepted stream.
  void connect_pair(const ConnectionParams& p, Stream& client, Stream& server,
                    ConnectReport* report = nullptr);
  // Runs the loop until `n` structures are idle (recycled); false on timeout.
  bool wait_idle(std::size_t n, Duration limit = std::chrono::seconds(20));
  std::uint64_t counter(const char* name) const { return manager_->counters().value(name); }
  // Random data both ways, byte-exact, then orderly EOF both ways.
  void exchange_exact(Stream& a, Stream& b, std::size_t bytes);

  std::unique_ptr<ConnectionManager> manager_;
  Listener managed_listener_;
  SocketAddress peer_;
  std::deque<Stream> accepted_q_;
};

}  // namespace rmsg::testing
