// The failure matrix over loopback streams with injected faults and a manual clock: each
// case ends with every message delivered exactly once and in order, or a reported reset.
#include <gtest/gtest.h>

#include "msg/messenger_loopback_fixture.h"

namespace rmsg::testing {
namespace {

using std::chrono::milliseconds;
using Kind = SessionEvent::Kind;

TEST_F(MessengerLoopbackTest, DeliversBothWaysInOrder) {
  start_both();
  send_a(100);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  send_b(50);  // B answers over the connection A made
  ASSERT_TRUE(run([&] { return a_has_all_from_b(); }));
  expect_clean();
  EXPECT_EQ(b_.node.ledger.delivered, 100u);
  EXPECT_EQ(a_.node.count(Kind::connected), 1);
  EXPECT_EQ(b_.node.count(Kind::connected), 1);
  EXPECT_EQ(a_.node.counter("msg.connects"), 1u);
  EXPECT_EQ(b_.node.counter("msg.accepts"), 1u);
}

}  // namespace
}  // namespace rmsg::testing
