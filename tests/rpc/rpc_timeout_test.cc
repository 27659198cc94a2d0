// The relative timeout of a call (CallOptions::timeout, call(..., Duration, done)): counted
// on the peer's loop's clock (here a manual clock hours away from steady_clock's), and
// exactly one of deadline and timeout.
#include <gtest/gtest.h>

#include <chrono>

#include "rpc/rpc_loopback_fixture.h"

namespace rmsg::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(RpcLoopbackTest, RelativeTimeoutCountsOnThePeersLoopClock) {
  start(a_, kPortA, rpc_options(kA));
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());  // B is not up
  const auto t0 = loop_->now();
  RpcResponse got;
  bool done = false;
  auto id = a_.ep->call(kB, kEcho, bytes_of("x"), milliseconds(100), [&](RpcResponse r) {
    got = std::move(r);
    done = true;
  });
  ASSERT_TRUE(id.ok()) << id.error().message();
  ASSERT_TRUE(run([&] { return done; }));
  EXPECT_EQ(got.id, id.value());
  EXPECT_EQ(got.error, make_error_code(Errc::connection_refused));  // why, at the deadline
  // The manual clock moves only to the loop's next timer: the deadline was t0 + 100 ms on
  // it (steady_clock's now() would have put it hours away).
  EXPECT_GE(loop_->now() - t0, milliseconds(100));
  EXPECT_LT(loop_->now() - t0, milliseconds(1000));
}

TEST_F(RpcLoopbackTest, RelativeTimeoutCallSucceedsLikeADeadlineCall) {
  start_both();
  RpcResponse got;
  bool done = false;
  auto id = a_.ep->call(kB, kEcho, bytes_of("hello"), CallOptions{.timeout = milliseconds(500)},
                        [&](RpcResponse r) {
                          got = std::move(r);
                          done = true;
                        });
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(run([&] { return done; }));
  EXPECT_FALSE(got.error) << got.error.message();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.body.data()), got.body.size()), "hello");
}

TEST_F(RpcLoopbackTest, ExactlyOneOfDeadlineAndTimeout) {
  start_both();
  auto none = [](RpcResponse) {};
  EXPECT_TRUE(
      a_.ep->call(kB, kEcho, bytes_of("x"), CallOptions{}, none).is(Errc::invalid_argument));
  EXPECT_TRUE(
      a_.ep->call(kB, kEcho, bytes_of("x"), Duration::zero(), none).is(Errc::invalid_argument));
  EXPECT_TRUE(a_.ep
                  ->call(kB, kEcho, bytes_of("x"),
                         CallOptions{.deadline = loop_->now() + milliseconds(10),
                                     .timeout = milliseconds(10)},
                         none)
                  .is(Errc::invalid_argument));
  auto past = a_.ep->call(kB, kEcho, bytes_of("x"), milliseconds(-1), none);
  EXPECT_EQ(past.error(), make_error_code(RpcErrc::timeout));
}

}  // namespace
}  // namespace rmsg::testing
