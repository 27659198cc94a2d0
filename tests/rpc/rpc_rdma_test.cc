// RPC over RDMA in the Soft-RoCE guest: many outstanding calls with the connections
// killed under them (the peer sees a real disconnect): every call completes ok and each
// request ran exactly once. retry_count 6: rxe retries for ever at 7.
#include <gtest/gtest.h>

#include <cstdlib>

#include "rpc/rpc_real_fixture.h"

namespace rmsg::testing {
namespace {

class RpcRdmaTest : public RpcRealTest {
 protected:
  void SetUp() override {
    const char* addr = std::getenv("RMSG_RDMA_ADDR");
    ASSERT_NE(addr, nullptr) << "RMSG_RDMA_ADDR is not set: run in the Soft-RoCE guest";
    host_ = addr;
    RpcRealTest::SetUp();
  }
  ConnectionParams params() const override {
    ConnectionParams p;
    p.transport = Transport::rdma;
    p.rdma.retry_count = 6;
    p.rdma.rnr_retry_count = 0;
    p.rdma.keepalive_interval = std::chrono::milliseconds(200);
    p.rdma.idle_timeout = std::chrono::milliseconds(2000);
    return p;
  }
  std::string host() const override { return host_; }
  std::string host_;
};

TEST_F(RpcRdmaTest, CallsSurviveKilledConnectionsExactlyOnce) {
  calls_with_kills(1000, 64, 300, std::chrono::seconds(60));
}

}  // namespace
}  // namespace rmsg::testing
