// RPC over real TCP on the host: many outstanding calls with the connections killed under
// them (a real RST): every call completes ok and each request ran exactly once.
#include <gtest/gtest.h>

#include "msg/rpc_real_fixture.h"

namespace rmsg::testing {
namespace {

class RpcTcpTest : public RpcRealTest {
 protected:
  ConnectionParams params() const override {
    ConnectionParams p;
    p.transport = Transport::tcp;
    return p;
  }
  std::string host() const override { return "127.0.0.1"; }
};

TEST_F(RpcTcpTest, CallsSurviveKilledConnectionsExactlyOnce) {
  calls_with_kills(4000, 128, 700, std::chrono::seconds(30));
}

}  // namespace
}  // namespace rmsg::testing
