// RPC over real TCP on the host: many outstanding calls with the connections killed under
// them (a real RST): every call completes ok and each request ran exactly once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

#include "msg/rpc_fixture.h"

namespace rmsg::testing {
namespace {

class RpcTcpTest : public ::testing::Test {
 protected:
  static constexpr NodeId kA = 1;
  static constexpr NodeId kB = 2;

  void SetUp() override {
    EventLoopOptions lo;
    lo.seed = seed_for("loop");
    auto l = EventLoop::create(lo);
    ASSERT_TRUE(l.ok());
    loop_ = std::move(l).value();
  }
  void TearDown() override {
    a_.ep.reset();
    b_.ep.reset();
    loop_->run_for([] { return false; }, std::chrono::milliseconds(20));
  }
  static ConnectionParams tcp() {
    ConnectionParams p;
    p.transport = Transport::tcp;
    return p;
  }
  void start(RpcSide& side, NodeId id) {
    auto streams = std::make_unique<KillableStreams>(*loop_);
    side.streams = streams.get();
    RpcSide* s = &side;
    auto ep = RpcAccess::create(*loop_, rpc_options(id), std::move(streams),
                                [s](SessionEvent e) { s->events.push_back(std::move(e)); });
    ASSERT_TRUE(ep.ok());
    side.ep = std::move(ep).value();
    auto bound =
        side.ep->messenger().listen(SocketAddress::from_host_port("127.0.0.1", 0).value(), tcp());
    ASSERT_TRUE(bound.ok()) << bound.error().message();
    side.address = bound.value();
  }

  std::unique_ptr<EventLoop> loop_;
  RpcSide a_;
  RpcSide b_;
};

TEST_F(RpcTcpTest, CallsSurviveKilledConnectionsExactlyOnce) {
  start(a_, kA);
  start(b_, kB);
  ConnectionParams pb = tcp();
  pb.peer = SocketAddress::parse(b_.address).value();
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, pb).ok());
  std::map<std::uint64_t, int> runs;  // request number -> times its handler ran
  b_.ep->handle(1, [&](const RpcRequest& r, RpcResponder reply) {
    std::uint64_t n = 0;
    std::memcpy(&n, r.body.data(), sizeof n);
    ++runs[n];
    reply.ok(r.body);
  });
  constexpr std::uint64_t kTotal = 4000;
  constexpr std::size_t kDepth = 128;
  std::uint64_t sent = 0;
  std::uint64_t ok = 0;
  std::uint64_t bad = 0;
  std::size_t outstanding = 0;
  int kills = 0;
  std::uint64_t next_kill = 500;
  const auto t0 = std::chrono::steady_clock::now();
  const bool done = loop_->run_for(
      [&] {
        while (outstanding < kDepth && sent < kTotal) {
          const std::uint64_t n = ++sent;
          std::vector<std::byte> body(64);
          std::memcpy(body.data(), &n, sizeof n);
          auto r = a_.ep->call(kB, 1, body, {.deadline = loop_->now() + std::chrono::seconds(20)},
                               [&, n](RpcResponse resp) {
                                 --outstanding;
                                 std::uint64_t echoed = 0;
                                 if (resp.body.size() >= 8)
                                   std::memcpy(&echoed, resp.body.data(), 8);
                                 (resp.error || echoed != n ? bad : ok) += 1;
                               });
          if (!r) {
            ADD_FAILURE() << r.error().message();
            return true;
          }
          ++outstanding;
        }
        if (ok >= next_kill) {
          kills += (kills % 2 ? a_.streams : b_.streams)->kill_all();
          next_kill += 700;
        }
        return ok + bad == kTotal;
      },
      std::chrono::seconds(30));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ rpc tcp  ] %llu calls, %d kills, %.2f s\n",
              static_cast<unsigned long long>(kTotal), kills, secs);
  ASSERT_TRUE(done);
  EXPECT_EQ(ok, kTotal);
  EXPECT_EQ(bad, 0u);
  EXPECT_GE(kills, 3);
  EXPECT_EQ(runs.size(), kTotal);
  EXPECT_EQ(a_.count(SessionEvent::Kind::reset), 0);
  EXPECT_EQ(b_.count(SessionEvent::Kind::reset), 0);
  for (const auto& [n, times] : runs) ASSERT_EQ(times, 1) << "request " << n;
  EXPECT_GE(a_.count(SessionEvent::Kind::disconnected), 3);
  EXPECT_EQ(a_.ep->peer_stats(kB)->ok, kTotal);
}

}  // namespace
}  // namespace rmsg::testing
