// TCP: a listener, a connect and a ConnectionManager made on the main thread; the loop runs
// on a second thread (cross_thread.h).
#include <gtest/gtest.h>

#include "cross_thread.h"

namespace rmsg::testing {
namespace {

TEST(CrossThreadTcp, ObjectsMadeBeforeTheLoopRunsOnAnotherThreadCarryData) {
  auto address = SocketAddress::parse("127.0.0.1:0");
  ASSERT_TRUE(address.ok());
  const CrossThreadResult r = run_cross_thread(Transport::tcp, address.value());
  EXPECT_EQ(r.connect_errors, "");
  EXPECT_TRUE(r.plain_exact);
  EXPECT_TRUE(r.managed_exact);
}

}  // namespace
}  // namespace rmsg::testing
