// Two RPC endpoints on one real loop over killable ConnectionManager streams (TCP on the
// host, RDMA in the Soft-RoCE guest), and the kill scenario both run: many outstanding
// calls with the connections killed under them; every call must complete ok and every
// request must run exactly once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rpc/rpc_fixture.h"

namespace rmsg::testing {

class RpcRealTest : public ::testing::Test {
 protected:
  static constexpr NodeId kA = 1;
  static constexpr NodeId kB = 2;

  virtual ConnectionParams params() const = 0;
  virtual std::string host() const = 0;

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
  void start(RpcSide& side, NodeId id) {
    auto streams = std::make_unique<KillableStreams>(*loop_);
    side.streams = streams.get();
    RpcSide* s = &side;
    auto ep = RpcAccess::create(*loop_, rpc_options(id), std::move(streams),
                                [s](SessionEvent e) { s->events.push_back(std::move(e)); });
    ASSERT_TRUE(ep.ok());
    side.ep = std::move(ep).value();
    auto bound =
        side.ep->messenger().listen(SocketAddress::from_host_port(host(), 0).value(), params());
    ASSERT_TRUE(bound.ok()) << bound.error().message();
    side.address = bound.value();
  }

  // `total` echo calls from A to B, `depth` outstanding, a kill every `kill_every` replies
  // (B's streams and A's by turns).
  void calls_with_kills(std::uint64_t total, std::size_t depth, std::uint64_t kill_every,
                        Duration limit) {
    start(a_, kA);
    start(b_, kB);
    ConnectionParams pb = params();
    pb.peer = SocketAddress::parse(b_.address).value();
    ASSERT_TRUE(a_.ep->messenger().add_peer(kB, pb).ok());
    std::map<std::uint64_t, int> runs;  // request number -> times its handler ran
    b_.ep->handle(1, [&](const RpcRequest& r, RpcResponder reply) {
      std::uint64_t n = 0;
      std::memcpy(&n, r.body.data(), sizeof n);
      ++runs[n];
      reply.ok(r.body);
    });
    std::uint64_t sent = 0, ok = 0, bad = 0;
    std::size_t outstanding = 0;
    int kills = 0;
    std::uint64_t next_kill = kill_every;
    const auto t0 = std::chrono::steady_clock::now();
    const bool done = loop_->run_for(
        [&] {
          while (outstanding < depth && sent < total) {
            const std::uint64_t n = ++sent;
            std::vector<std::byte> body(64);
            std::memcpy(body.data(), &n, sizeof n);
            auto r = a_.ep->call(kB, 1, body, {.deadline = loop_->now() + limit},
                                 [&, n](RpcResponse resp) {
                                   --outstanding;
                                   std::uint64_t echoed = 0;
                                   if (resp.body.size() >= 8) {
                                     std::memcpy(&echoed, resp.body.data(), 8);
                                   }
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
            next_kill += kill_every;
          }
          return ok + bad == total;
        },
        limit);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ rpc kill ] %llu calls %zu deep, %d kills, %.2f s\n",
                static_cast<unsigned long long>(total), depth, kills, secs);
    ASSERT_TRUE(done);
    EXPECT_EQ(ok, total);
    EXPECT_EQ(bad, 0u);
    EXPECT_GE(kills, 2);
    EXPECT_EQ(runs.size(), total);
    EXPECT_EQ(a_.count(SessionEvent::Kind::reset), 0);
    EXPECT_EQ(b_.count(SessionEvent::Kind::reset), 0);
    for (const auto& [n, times] : runs) ASSERT_EQ(times, 1) << "request " << n;
    EXPECT_GE(a_.count(SessionEvent::Kind::disconnected), 2);
    EXPECT_EQ(a_.ep->peer_stats(kB)->ok, total);
  }

  std::unique_ptr<EventLoop> loop_;
  RpcSide a_;
  RpcSide b_;
};

}  // namespace rmsg::testing
