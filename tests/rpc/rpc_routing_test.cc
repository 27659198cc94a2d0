// Which thread may go straight into an RPC shard, as for the messenger
// (tests/msg/front_routing_test.cc): before a loop first runs every thread passes
// EventLoop::in_loop_thread(); calls are routed by the first thread that asks instead, so a
// second thread's call is handed over (call_any_thread), not run inside the shard at the same
// time. Debug builds abort a shard's loop-thread-only call made on another thread. TSan's
// tier runs this file.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "rmsg/loop_threads.h"
#include "rmsg/rpc.h"
#include "rpc/rpc_front.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr NodeId kPeer = 2;

RpcOptions options() {
  RpcOptions o;
  o.messenger.node_id = 1;
  return o;
}

CallOptions far_deadline(EventLoop& loop) {
  CallOptions c;
  c.deadline = loop.now() + 60s;
  return c;
}

TEST(RpcRouting, ASecondThreadBeforeTheLoopRunsIsHandedOver) {
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  EventLoop& loop = **l;
  auto ep = RpcEndpoint::create(loop, options());
  ASSERT_TRUE(ep.ok());
  // No messenger call first: nothing claimed the loop for this thread before call() does
  // (the peer has no address, so the requests wait in its session's queue).
  std::atomic<int> done{0};
  const auto count = [&](const RpcResponse&) { ++done; };
  const std::vector<std::byte> body(8);
  ASSERT_TRUE((*ep)->call(kPeer, 1, body, far_deadline(loop), count).ok());
  ASSERT_TRUE((*ep)->peer_stats(kPeer).has_value());
  EXPECT_EQ((*ep)->peer_stats(kPeer)->outstanding, 1u) << "the first thread goes straight in";
  std::thread other(
      [&] { EXPECT_TRUE((*ep)->call(kPeer, 1, body, far_deadline(loop), count).ok()); });
  other.join();
  EXPECT_EQ((*ep)->peer_stats(kPeer)->outstanding, 1u) << "another thread's call went straight in";
  EXPECT_TRUE(loop.run_for([&] { return (*ep)->peer_stats(kPeer)->outstanding == 2; }, 10s));
  (*ep).reset();  // both complete shutting_down, on this (the loop's) thread
  EXPECT_EQ(done.load(), 2);
}

#ifndef NDEBUG
TEST(RpcRouting, LoopThreadOnlyCallsAbortOnAnotherThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto lt = LoopThreads::create(1);
  ASSERT_TRUE(lt.ok());
  auto ep = RpcEndpoint::create((*lt)->loops(), options());
  ASSERT_TRUE(ep.ok());
  (*lt)->start();
  RpcEndpoint::Impl& shard = RpcEndpoint::Front::of(**ep).shard_of(kPeer);
  EventLoop& loop = *(*lt)->loops()[0];
  const std::vector<std::byte> body(8);
  EXPECT_DEATH(
      static_cast<void>(shard.call(kPeer, 1, body, far_deadline(loop), [](const RpcResponse&) {})),
      "loop-thread-only");
  EXPECT_DEATH(static_cast<void>(shard.cancel(1)), "loop-thread-only");
  EXPECT_DEATH(shard.on_message(kPeer, body), "loop-thread-only");
  EXPECT_DEATH(shard.shutdown(), "loop-thread-only");
  EXPECT_DEATH(static_cast<void>((*ep)->peer_stats(kPeer)), "loop-thread-only");
  (*ep).reset();
}
#endif

}  // namespace
}  // namespace rmsg::testing
