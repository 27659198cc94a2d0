// Which thread may go straight into a shard. Before a loop first runs every thread passes
// EventLoop::in_loop_thread(); the fronts route by the first thread that asks instead, so a
// second thread's call is posted. A teardown that would wait on a loop whose thread
// LoopThreads::stop() joined does not hang. Debug builds abort a loop-thread-only entry
// called on another thread. TSan's tier runs this file.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "rmsg/loop_threads.h"
#include "rmsg/messenger.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr NodeId kPeer = 2;

std::unique_ptr<Messenger> make(std::span<EventLoop* const> loops) {
  MessengerOptions o;
  o.node_id = 1;
  auto m = Messenger::create(loops, o, [](NodeId, std::span<const std::byte>) {});
  EXPECT_TRUE(m.ok());
  return m.ok() ? std::move(m).value() : nullptr;
}

ConnectionParams nowhere() {
  ConnectionParams p;
  p.transport = Transport::tcp;
  p.peer = SocketAddress::from_host_port("127.0.0.1", 1).value();  // refused: it retries
  return p;
}

TEST(FrontRouting, ASecondThreadBeforeTheLoopRunsIsPosted) {
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  EventLoop* loops[] = {l->get()};
  auto m = make(loops);
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->add_peer(kPeer, nowhere()).ok());
  const std::vector<std::byte> payload(8);
  ASSERT_TRUE(m->send(kPeer, payload).ok());
  ASSERT_TRUE(m->session_info(kPeer).has_value());
  EXPECT_EQ(m->session_info(kPeer)->queued, 1u) << "the first thread goes straight in";
  std::thread other([&] { EXPECT_TRUE(m->send(kPeer, payload).ok()); });
  other.join();
  EXPECT_EQ(m->session_info(kPeer)->queued, 1u) << "another thread's send went straight in";
  EXPECT_TRUE((*l)->run_for([&] { return m->session_info(kPeer)->queued == 2; }, 10s));
  m.reset();
}

TEST(FrontRouting, TeardownAfterLoopThreadsStoppedDoesNotHang) {
  auto lt = LoopThreads::create(2);
  ASSERT_TRUE(lt.ok());
  auto m = make((*lt)->loops());
  ASSERT_TRUE(m);
  (*lt)->start();
  (*lt)->stop();
#ifdef NDEBUG
  m.reset();  // logged; runs the teardown here, as no thread runs the loops any more
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(m.reset(), "stopped loop");
  (*lt)->start();  // the loops run again: the teardown waits on them as it should
  m.reset();
  (*lt)->stop();
#endif
  EXPECT_FALSE(m);
}

#ifndef NDEBUG
TEST(FrontRouting, LoopThreadOnlyEntriesAbortOnAnotherThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto lt = LoopThreads::create(1);
  ASSERT_TRUE(lt.ok());
  auto m = make((*lt)->loops());
  ASSERT_TRUE(m);
  (*lt)->start();
  EXPECT_DEATH(static_cast<void>(m->session_info(kPeer)), "loop-thread-only");
  EXPECT_DEATH(static_cast<void>(m->withdraw(kPeer, Messenger::Ticket{})), "loop-thread-only");
  EXPECT_DEATH(static_cast<void>(m->send_tracked(kPeer, std::vector<std::byte>(8))),
               "loop-thread-only");
  m.reset();
}
#endif

}  // namespace
}  // namespace rmsg::testing
