// RDMA (Soft-RoCE guest): a listener, a connect and a ConnectionManager made on the main
// thread; the loop runs on a second thread (cross_thread.h). With a per-thread rdma_cm
// channel the accepted ids' events went to the main thread's channel: ESTABLISHED was
// dropped and every passive connect timed out; recycled ids lost TIMEWAIT_EXIT, so their
// structures waited for timewait_limit.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cross_thread.h"

namespace rmsg::testing {
namespace {

TEST(CrossThreadRdma, ObjectsMadeBeforeTheLoopRunsOnAnotherThreadCarryDataAndRecycle) {
  const char* addr = std::getenv("RMSG_RDMA_ADDR");
  ASSERT_NE(addr, nullptr) << "RMSG_RDMA_ADDR is not set: run in the Soft-RoCE guest";
  auto address = SocketAddress::from_host_port(addr, 0);
  ASSERT_TRUE(address.ok()) << addr;
  const CrossThreadResult r = run_cross_thread(Transport::rdma, address.value());
  EXPECT_EQ(r.connect_errors, "");
  EXPECT_TRUE(r.plain_exact);
  EXPECT_TRUE(r.managed_exact);
  // Both managed structures (client and server) parked again on TIMEWAIT_EXIT, long before
  // the 60 s cap: the events of the recycled ids reached the loop's one channel.
  EXPECT_EQ(r.idle_after_close, 2u);
  EXPECT_EQ(r.recycled, 2u);
  EXPECT_EQ(r.timewait_missing, 0u);
}

}  // namespace
}  // namespace rmsg::testing
