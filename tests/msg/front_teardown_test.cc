// #22: a front over several loops (Messenger, RpcEndpoint) waits for each of its loops when
// destroyed. Two of them destroyed at the same moment from each other's loop threads (or
// over the same loops, each from another loop) must not wait for each other for ever:
// msg::wait_on_loop runs, on a blocked loop thread, what others wait on that loop to run.
// TSan's tier runs this file.
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>

#include "rmsg/loop_threads.h"
#include "rmsg/messenger.h"
#include "rmsg/rpc.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

MessengerOptions opts(NodeId id) {
  MessengerOptions o;
  o.node_id = id;
  return o;
}

// Destroys `a` on `on_a`'s thread and `b` on `on_b`'s at once (both tasks wait for each
// other first) and returns whether both destructors returned within a generous bound. On
// a deadlock the objects and loops are leaked: nothing can stop those threads any more.
template <class T>
bool destroy_crosswise(std::unique_ptr<T>& a, EventLoop& on_a, std::unique_ptr<T>& b,
                       EventLoop& on_b, std::unique_ptr<LoopThreads>& x,
                       std::unique_ptr<LoopThreads>& y) {
  auto arrived = std::make_shared<std::latch>(2);
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    int n = 0;
  };
  auto done = std::make_shared<Done>();
  auto destroy = [arrived, done](T* victim) {
    return [arrived, done, victim] {
      arrived->arrive_and_wait();
      delete victim;
      const std::lock_guard lock(done->mu);
      ++done->n;
      done->cv.notify_all();
    };
  };
  on_a.post(destroy(a.release()));
  on_b.post(destroy(b.release()));
  std::unique_lock lock(done->mu);
  if (done->cv.wait_for(lock, 30s, [&] { return done->n == 2; })) return true;
  (void)x.release();
  (void)y.release();
  return false;
}

TEST(FrontTeardown, TwoMessengersDestroyedAtOnceFromEachOthersLoops) {
  auto x = LoopThreads::create(2).value();
  auto y = LoopThreads::create(2).value();
  auto a =
      Messenger::create(x->loops(), opts(1), [](NodeId, std::span<const std::byte>) {}).value();
  auto b =
      Messenger::create(y->loops(), opts(2), [](NodeId, std::span<const std::byte>) {}).value();
  x->start();
  y->start();
  EXPECT_TRUE(destroy_crosswise(a, y->loop(0), b, x->loop(0), x, y)) << "deadlock";
}

TEST(FrontTeardown, TwoMessengersOverTheSameLoopsDestroyedAtOnceFromEachLoop) {
  auto x = LoopThreads::create(2).value();
  std::unique_ptr<LoopThreads> none;
  auto a =
      Messenger::create(x->loops(), opts(1), [](NodeId, std::span<const std::byte>) {}).value();
  auto b =
      Messenger::create(x->loops(), opts(2), [](NodeId, std::span<const std::byte>) {}).value();
  x->start();
  EXPECT_TRUE(destroy_crosswise(a, x->loop(0), b, x->loop(1), x, none)) << "deadlock";
}

TEST(FrontTeardown, TwoRpcEndpointsDestroyedAtOnceFromEachOthersLoops) {
  auto x = LoopThreads::create(2).value();
  auto y = LoopThreads::create(2).value();
  RpcOptions oa, ob;
  oa.messenger = opts(1);
  ob.messenger = opts(2);
  auto a = RpcEndpoint::create(x->loops(), oa).value();
  auto b = RpcEndpoint::create(y->loops(), ob).value();
  x->start();
  y->start();
  EXPECT_TRUE(destroy_crosswise(a, y->loop(0), b, x->loop(0), x, y)) << "deadlock";
}

}  // namespace
}  // namespace rmsg::testing
