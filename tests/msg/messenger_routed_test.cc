// A messenger over two shards that listens over RDMA routes each connect request by the
// connector's affinity (StreamFactory::listen_routed). A fake factory stands in for the
// ConnectionManager's router, over loopback streams: both shards and the connector on one
// loop driven by this thread, so what each shard records, and what it refuses, is seen
// without a device. Also: the options a messenger refuses at creation.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "kit/loopback.h"
#include "kit/seed.h"
#include "msg/messenger_front.h"
#include "msg/msg_harness.h"
#include "msg/routed_streams.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr NodeId kServer = 1;

MessengerOptions opts(NodeId id) {
  MessengerOptions o;
  o.node_id = id;
  o.backoff_initial = 2ms;
  o.backoff_max = 20ms;
  return o;
}

class MessengerRouted : public ::testing::Test {
 protected:
  void SetUp() override {
    EventLoopOptions lo;
    lo.seed = seed_for("loop");
    loop_ = EventLoop::create(lo).value();
    EventLoop* loops[2] = {loop_.get(), loop_.get()};  // two shards, one thread
    server_ =
        MessengerAccess::create(
            loops, opts(kServer),
            [this](EventLoop& l) -> Result<std::unique_ptr<StreamFactory>> {
              return std::unique_ptr<StreamFactory>(std::make_unique<RoutedStreams>(l, net_, true));
            },
            [this](NodeId from, std::span<const std::byte>) { delivered_.push_back(from); }, {})
            .value();
    ASSERT_TRUE(server_->listen(SocketAddress::parse("127.0.0.1:7").value(), rdma_params()).ok());
  }
  std::unique_ptr<Messenger> client(NodeId id, bool send_affinity) {
    auto m = MessengerAccess::create(*loop_, opts(id),
                                     std::make_unique<RoutedStreams>(*loop_, net_, send_affinity),
                                     [](NodeId, std::span<const std::byte>) {}, {})
                 .value();
    EXPECT_TRUE(m->add_peer(kServer, rdma_params()).ok());
    return m;
  }
  // The first id from `from` on that the server's shard `shard` owns.
  NodeId owned_by(std::size_t shard, NodeId from) {
    while (MessengerAccess::front(*server_).owner(from) != shard) ++from;
    return from;
  }

  std::shared_ptr<RoutedNet> net_ = std::make_shared<RoutedNet>();
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Messenger> server_;
  std::vector<NodeId> delivered_;
};

// #9: the shard that accepts a routed connection records it as RDMA, as the connector does.
TEST_F(MessengerRouted, AnRdmaConnectionAcceptedOverSeveralLoopsIsRecordedAsRdma) {
  for (std::size_t shard : {0u, 1u}) {
    const NodeId id = owned_by(shard, 100);
    auto c = client(id, true);
    auto sent = c->send(kServer, numbered(1));
    ASSERT_TRUE(sent.ok()) << sent.error().message();
    ASSERT_TRUE(loop_->run_for(
        [&] { return std::count(delivered_.begin(), delivered_.end(), id) == 1; }, 10s))
        << shard;
    auto mine = c->session_info(kServer);
    auto theirs = server_->session_info(id);
    ASSERT_TRUE(mine && theirs);
    EXPECT_EQ(mine->transport, Transport::rdma);
    EXPECT_EQ(theirs->transport, Transport::rdma) << "shard " << shard;
  }
  EXPECT_EQ(server_->counter_total("msg.switches.to_tcp"), 0u);
}

// #14: a connect request without affinity lands on shard 0. A hello from a peer that shard
// owns makes its one session there; one from a peer of shard 1 is relayed to shard 1, which
// holds its one session: messages both ways, the server's reply delivered.
TEST_F(MessengerRouted, AnAffinitylessHelloIsServedByTheShardThatOwnsThePeer) {
  const NodeId mine = owned_by(0, 100);
  auto a = client(mine, false);
  ASSERT_TRUE(a->send(kServer, numbered(1)).ok());
  ASSERT_TRUE(loop_->run_for(
      [&] { return std::count(delivered_.begin(), delivered_.end(), mine) == 1; }, 10s));
  EXPECT_EQ(server_->counter_total("msg.accepts.relayed"), 0u);
  delivered_.clear();

  const NodeId other = owned_by(1, 100);
  std::size_t replies = 0;
  auto b = MessengerAccess::create(*loop_, opts(other),
                                   std::make_unique<RoutedStreams>(*loop_, net_, false),
                                   [&](NodeId from, std::span<const std::byte>) {
                                     if (from == kServer) ++replies;
                                   },
                                   {})
               .value();
  ASSERT_TRUE(b->add_peer(kServer, rdma_params()).ok());
  for (std::uint64_t i = 1; i <= 3; ++i) ASSERT_TRUE(b->send(kServer, numbered(i)).ok());
  ASSERT_TRUE(loop_->run_for([&] { return delivered_.size() >= 3; }, 10s))
      << "wrong_loop " << server_->counter_total("msg.accepts.wrong_loop");
  for (std::uint64_t i = 1; i <= 2; ++i) ASSERT_TRUE(server_->send(other, numbered(i)).ok());
  ASSERT_TRUE(loop_->run_for([&] { return replies == 2; }, 10s));
  EXPECT_EQ(std::count(delivered_.begin(), delivered_.end(), other), 3);
  EXPECT_EQ(server_->counters(0).value("msg.accepts.relayed"), 1u);
  EXPECT_EQ(server_->counter_total("msg.accepts.wrong_loop"), 0u);
  EXPECT_EQ(server_->counters(0).value("msg.opened"), 1u);  // the first client's only
  EXPECT_EQ(server_->counters(1).value("msg.opened"), 1u);  // the relayed one's
  auto info = server_->session_info(other);
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->connected);
  EXPECT_EQ(info->transport, Transport::rdma);
  EXPECT_EQ(b->counter_total("msg.resets"), 0u);
}

// #18: a window beyond what a receiver delivers ahead of in_seq (65536) is refused.
TEST(MessengerOptionsBounds, AWindowBeyondTheReceiversReachIsRefused) {
  auto loop = EventLoop::create().value();
  auto make = [&](std::size_t window) {
    MessengerOptions o = opts(kServer);
    o.window_messages = window;
    return Messenger::create(*loop, o, [](NodeId, std::span<const std::byte>) {});
  };
  EXPECT_TRUE(make(65536).ok());
  auto over = make(65537);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error(), make_error_code(Errc::invalid_argument));
}

}  // namespace
}  // namespace rmsg::testing
