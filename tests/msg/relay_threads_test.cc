// #14 over two loop threads (TSan's tier runs this file): a connector that sends no
// affinity lands on loop 0 of a two-loop messenger whose loop 1 owns it. Loop 0 relays the
// connection (msg/session_relay.cc): one session, on loop 1's thread, messages both ways,
// large ones included (each bigger than the relay's pipes, so both directions wait for
// room on the other thread).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "msg/messenger_front.h"
#include "msg/msg_harness.h"
#include "msg/relay_channel.h"
#include "msg/routed_streams.h"
#include "rmsg/loop_threads.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr NodeId kServer = 1;

MessengerOptions relay_opts(NodeId id) {
  MessengerOptions o;
  o.node_id = id;
  o.backoff_initial = 2ms;
  o.backoff_max = 20ms;
  return o;
}

// Deliveries counted on the loop threads; the test thread waits for a count, up to a
// deadline.
class Tally {
 public:
  void one() {
    const std::lock_guard lock(mu_);
    ++n_;
    cv_.notify_all();
  }
  bool wait_for(int n, Duration limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return n_ >= n; });
  }
  int count() {
    const std::lock_guard lock(mu_);
    return n_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 0;
};

TEST(MessengerRelayThreads, AnAffinitylessConnectorIsServedOnTheOwnersThread) {
  constexpr std::size_t kBig = 3 * msg::kRelayCapacity / 2;
  constexpr int kEach = 8;
  auto loops = LoopThreads::create(2).value();
  auto net = std::make_shared<RoutedNet>();
  Tally at_server, at_client;
  std::atomic<int> off_thread{0};
  auto server =
      MessengerAccess::create(
          loops->loops(), relay_opts(kServer),
          [&](EventLoop& l) -> Result<std::unique_ptr<StreamFactory>> {
            return std::unique_ptr<StreamFactory>(std::make_unique<RoutedStreams>(l, net, true));
          },
          [&](NodeId, std::span<const std::byte>) {
            if (!loops->loop(1).in_loop_thread()) off_thread.fetch_add(1);
            at_server.one();
          },
          {})
          .value();
  NodeId peer = 100;
  while (MessengerAccess::front(*server).owner(peer) != 1) ++peer;
  auto client =
      MessengerAccess::create(loops->loop(0), relay_opts(peer),
                              std::make_unique<RoutedStreams>(loops->loop(0), net, false),
                              [&](NodeId, std::span<const std::byte>) { at_client.one(); }, {})
          .value();
  ASSERT_TRUE(server->listen(rdma_params().peer, rdma_params()).ok());
  ASSERT_TRUE(client->add_peer(kServer, rdma_params()).ok());
  loops->start();
  for (int i = 0; i < kEach; ++i) {
    ASSERT_TRUE(client->send(kServer, std::vector<std::byte>(i % 2 ? kBig : 64)).ok());
  }
  ASSERT_TRUE(at_server.wait_for(kEach, 30s)) << at_server.count();
  for (int i = 0; i < kEach; ++i) {
    ASSERT_TRUE(server->send(peer, std::vector<std::byte>(i % 2 ? kBig : 64)).ok());
  }
  ASSERT_TRUE(at_client.wait_for(kEach, 30s)) << at_client.count();
  EXPECT_EQ(off_thread.load(), 0);
  std::uint64_t relayed = 0, opened0 = 0, opened1 = 0;
  loops->run_sync(0, [&] {
    relayed = server->counters(0).value("msg.accepts.relayed");
    opened0 = server->counters(0).value("msg.opened");
  });
  loops->run_sync(1, [&] { opened1 = server->counters(1).value("msg.opened"); });
  EXPECT_EQ(relayed, 1u);
  EXPECT_EQ(opened0, 0u);
  EXPECT_EQ(opened1, 1u);
  client.reset();
  server.reset();
}

}  // namespace
}  // namespace rmsg::testing
