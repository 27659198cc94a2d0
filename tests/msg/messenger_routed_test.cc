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

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr NodeId kServer = 1;

// What the listening messenger's listen_routed registered: the connectors' factories
// deliver to it.
struct RoutedNet {
  std::function<std::size_t(std::uint64_t)> owner;
  std::vector<AcceptCallback> accepted;
};

class RoutedStreams final : public StreamFactory {
 public:
  RoutedStreams(EventLoop& loop, std::shared_ptr<RoutedNet> net, bool send_affinity)
      : loop_(loop), net_(std::move(net)), send_affinity_(send_affinity) {}

  // A pair: one end to the connector, the other to the shard the affinity names, or to
  // shard 0 without one (as ManagerStreams' router does). Never inside this call.
  void connect(const ConnectionParams& /*params*/, ConnectCallback done) override {
    auto pair = std::make_shared<std::pair<Stream, Stream>>(loopback_pair(loop_));
    const std::uint64_t affinity = send_affinity_ ? affinity_ : 0;
    loop_.defer([net = net_, affinity, pair, done = std::move(done)] {
      if (net->accepted.empty()) return done(make_error_code(Errc::connection_refused));
      const std::size_t target = affinity == 0 ? 0 : net->owner(affinity) % net->accepted.size();
      net->accepted[target](std::move(pair->second));
      done(std::move(pair->first));
    });
  }
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& /*params*/,
                          AcceptCallback on_accept) override {
    return loopback_listen(loop_, "plain", address.port(), {}, std::move(on_accept));
  }
  Result<Listener> listen_routed(const SocketAddress& address, const ConnectionParams& /*params*/,
                                 std::span<StreamFactory* const> /*shards*/,
                                 std::function<std::size_t(std::uint64_t)> owner,
                                 std::vector<AcceptCallback> accepted) override {
    net_->owner = std::move(owner);
    net_->accepted = std::move(accepted);
    return loopback_listen(loop_, "routed", address.port(), {}, [](Stream) {});
  }
  void set_affinity(std::uint64_t affinity) override { affinity_ = affinity; }

 private:
  EventLoop& loop_;
  std::shared_ptr<RoutedNet> net_;
  bool send_affinity_;
  std::uint64_t affinity_ = 0;
};

ConnectionParams rdma_params() {
  ConnectionParams p;
  p.transport = Transport::rdma;
  p.peer = SocketAddress::parse("127.0.0.1:7").value();
  return p;
}

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
// owns makes its one session there; one from a peer of shard 1 is refused and counted
// (its session there would split from shard 1's, where the server's sends to it go).
TEST_F(MessengerRouted, AnAffinitylessHelloIsServedOnlyByTheShardThatOwnsThePeer) {
  const NodeId mine = owned_by(0, 100);
  auto a = client(mine, false);
  ASSERT_TRUE(a->send(kServer, numbered(1)).ok());
  ASSERT_TRUE(loop_->run_for(
      [&] { return std::count(delivered_.begin(), delivered_.end(), mine) == 1; }, 10s));
  EXPECT_EQ(server_->counter_total("msg.accepts.wrong_loop"), 0u);
  delivered_.clear();

  const NodeId other = owned_by(1, 100);
  auto b = client(other, false);
  ASSERT_TRUE(b->send(kServer, numbered(1)).ok());
  ASSERT_TRUE(loop_->run_for(
      [&] { return server_->counter_total("msg.accepts.wrong_loop") >= 2 || !delivered_.empty(); },
      10s));
  EXPECT_TRUE(delivered_.empty()) << "shard 0 made a session for shard 1's peer";
  EXPECT_EQ(server_->counters(0).value("msg.opened"), 1u);  // the first client's only
  EXPECT_EQ(server_->counters(1).value("msg.opened"), 0u);
  EXPECT_FALSE(server_->session_info(other).has_value() && server_->session_info(other)->connected);
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
