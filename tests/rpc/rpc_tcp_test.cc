// RPC over real TCP on the host: many outstanding calls with the connections killed under
// them (a real RST): every call completes ok and each request ran exactly once.
#include <gtest/gtest.h>

#include <algorithm>

#include "rpc/rpc_real_fixture.h"

namespace rmsg::testing {
namespace {

class RpcTcpTest : public RpcRealTest {
 protected:
  ConnectionParams params() const override {
    ConnectionParams p;
    p.transport = Transport::tcp;
    return p;
  }
  std::string host() const override { return "127.0.0.1"; }
};

TEST_F(RpcTcpTest, CallsSurviveKilledConnectionsExactlyOnce) {
  calls_with_kills(4000, 128, 700, std::chrono::seconds(30));
}

// Lanes and fragments (docs/messenger.md, Flow control): 64-byte calls one after another
// while 4 MiB calls keep the connection busy, with 64 KiB chunks and without. Every call
// completes ok; the small calls' latencies are printed (docs/perf.md), not asserted.
class RpcTcpFlowTest : public RpcTcpTest {
 protected:
  void start_with(RpcSide& side, NodeId id, std::size_t fragment_size) {
    RpcOptions o = rpc_options(id);
    o.messenger.fragment_size = fragment_size;
    auto streams = std::make_unique<KillableStreams>(*loop_);
    side.streams = streams.get();
    auto ep = RpcAccess::create(*loop_, o, std::move(streams), {});
    ASSERT_TRUE(ep.ok());
    side.ep = std::move(ep).value();
    auto bound =
        side.ep->messenger().listen(SocketAddress::from_host_port(host(), 0).value(), params());
    ASSERT_TRUE(bound.ok());
    side.address = bound.value();
  }
  // Returns the small calls' latencies (us), sorted.
  std::vector<double> small_beside_large(std::size_t fragment_size) {
    a_.ep.reset();
    b_.ep.reset();
    start_with(a_, kA, fragment_size);
    start_with(b_, kB, fragment_size);
    ConnectionParams pb = params();
    pb.peer = SocketAddress::parse(b_.address).value();
    EXPECT_TRUE(a_.ep->messenger().add_peer(kB, pb).ok());
    b_.ep->handle(1, [](const RpcRequest& r, RpcResponder reply) { reply.ok(r.body); });
    b_.ep->handle(2, [](const RpcRequest&, RpcResponder reply) { reply.ok(); });
    const std::vector<std::byte> big((std::size_t{4} << 20) - 64);  // with its header: 4 MiB
    const std::vector<std::byte> small(64);
    const auto deadline = [&] { return loop_->now() + std::chrono::seconds(20); };
    int big_done = 0, big_sent = 0, failed = 0;
    bool small_out = false;
    std::vector<double> lat;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const int kBig = 4;  // the sanitizer trees look for memory errors, not numbers
#else
    const int kBig = 12;
#endif
    const bool done = loop_->run_for(
        [&] {
          // Two large calls outstanding at a time, and one small call.
          while (big_sent < kBig && big_sent - big_done < 2) {
            ++big_sent;
            auto id = a_.ep->call(kB, 2, big, {deadline()}, [&](RpcResponse r) {
              ++big_done;
              failed += r.error ? 1 : 0;
            });
            EXPECT_TRUE(id.ok());
          }
          if (!small_out && big_done < kBig && big_sent > big_done) {
            small_out = true;
            auto id = a_.ep->call(kB, 1, small, {deadline()}, [&](RpcResponse r) {
              small_out = false;
              failed += r.error ? 1 : 0;
              lat.push_back(std::chrono::duration<double, std::micro>(r.latency).count());
            });
            EXPECT_TRUE(id.ok());
          }
          return big_done == kBig && !small_out;
        },
        std::chrono::seconds(30));
    EXPECT_TRUE(done);
    EXPECT_EQ(failed, 0);
    EXPECT_FALSE(lat.empty());
    std::sort(lat.begin(), lat.end());
    return lat;
  }
};

TEST_F(RpcTcpFlowTest, SmallCallsBesideLargeOnesWithAndWithoutFragments) {
  const auto pct = [](const std::vector<double>& v, double p) {
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
  };
  for (const std::size_t f : {std::size_t{64} << 10, std::size_t{0}}) {
    const auto lat = small_beside_large(f);
    std::printf(
        "[ flow     ] 64 B calls beside 4 MiB calls, fragment_size %zu: %zu calls, "
        "median %.0f us, p99 %.0f us, max %.0f us\n",
        f, lat.size(), pct(lat, 0.5), pct(lat, 0.99), lat.empty() ? 0.0 : lat.back());
  }
}

// A cancel that overtakes its own 4 MiB request over TCP (64 KiB chunks on the bulk lane,
// the cancel on the priority lane): B drops the request when it arrives, unrun.
TEST_F(RpcTcpFlowTest, ACancelThatOvertakesItsLargeRequestDropsItOverTcp) {
  start_with(a_, kA, std::size_t{64} << 10);
  start_with(b_, kB, std::size_t{64} << 10);
  ConnectionParams pb = params();
  pb.peer = SocketAddress::parse(b_.address).value();
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, pb).ok());
  int held_runs = 0;
  std::vector<RpcResponder> held;
  b_.ep->handle(1, [](const RpcRequest& r, RpcResponder reply) { reply.ok(r.body); });
  b_.ep->handle(2, [&](const RpcRequest&, RpcResponder reply) {
    ++held_runs;
    held.push_back(std::move(reply));
  });
  const auto deadline = [&] { return loop_->now() + std::chrono::seconds(20); };
  std::vector<RpcResponse> done;
  const auto keep = [&](RpcResponse r) { done.push_back(std::move(r)); };
  ASSERT_TRUE(a_.ep->call(kB, 1, std::vector<std::byte>(64), {deadline()}, keep).ok());
  ASSERT_TRUE(loop_->run_for([&] { return done.size() == 1; }, std::chrono::seconds(10)));
  const std::vector<std::byte> big((std::size_t{4} << 20) - 64);
  const CallId id = a_.ep->call(kB, 2, big, {deadline()}, keep).value();
  EXPECT_TRUE(a_.ep->cancel(id));  // right after call(): most of the request is unsent
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].error, make_error_code(RpcErrc::cancelled));
  ASSERT_TRUE(a_.ep->call(kB, 1, big, {deadline()}, keep).ok());  // behind it, same lane
  ASSERT_TRUE(loop_->run_for([&] { return done.size() == 3; }, std::chrono::seconds(20)));
  EXPECT_FALSE(done[2].error);
  EXPECT_EQ(held_runs, 0);
  EXPECT_EQ(b_.ep->counters().value("rpc.server.cancelled_unrun"), 1u);
  EXPECT_EQ(a_.ep->counters().value("rpc.late_replies"), 0u);
}

// Bounded dispatch over real TCP: B holds at most max_pending_requests responders and
// stops reading A's connection meanwhile; A's 8 MiB of requests wait (its queue, the
// socket buffers), none is lost, each runs once.
TEST_F(RpcTcpFlowTest, PendingRequestBoundPushesBackOverTcp) {
  RpcOptions ob = rpc_options(kB);
  ob.max_pending_requests = 8;
  start_with(a_, kA, std::size_t{64} << 10);
  auto streams = std::make_unique<KillableStreams>(*loop_);
  auto ep = RpcAccess::create(*loop_, ob, std::move(streams), {});
  ASSERT_TRUE(ep.ok());
  b_.ep = std::move(ep).value();
  auto bound = b_.ep->messenger().listen(SocketAddress::parse("127.0.0.1:0").value(), params());
  ASSERT_TRUE(bound.ok());
  ConnectionParams pb = params();
  pb.peer = SocketAddress::parse(bound.value()).value();
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, pb).ok());
  std::vector<RpcResponder> held;
  int runs = 0;
  b_.ep->handle(1, [&](const RpcRequest&, RpcResponder reply) {
    ++runs;
    held.push_back(std::move(reply));
  });
  constexpr int kCalls = 512;
  int ok = 0, failed = 0;
  const std::vector<std::byte> body(16 << 10);
  for (int i = 0; i < kCalls; ++i) {
    auto id = a_.ep->call(kB, 1, body, {loop_->now() + std::chrono::seconds(30)},
                          [&](RpcResponse r) { (r.error ? failed : ok) += 1; });
    ASSERT_TRUE(id.ok());
  }
  ASSERT_TRUE(loop_->run_for([&] { return held.size() == 8; }, std::chrono::seconds(10)));
  loop_->run_for([] { return false; }, std::chrono::milliseconds(200));
  EXPECT_EQ(held.size(), 8u);  // reading stopped at the bound
  const auto queued = a_.ep->messenger().session_info(kB)->queued;
  EXPECT_GE(queued, std::size_t{kCalls - 8});  // unacknowledged at A
  std::size_t answered = 0;
  std::size_t max_pending = 0;
  ASSERT_TRUE(loop_->run_for(
      [&] {
        max_pending = std::max(max_pending, held.size() - answered);
        while (answered < held.size()) held[answered++].ok();
        return ok + failed == kCalls;
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(ok, kCalls);
  EXPECT_EQ(runs, kCalls);
  EXPECT_LE(max_pending, 8u);
  std::printf(
      "[ flow     ] pending bound 8 over TCP: %d calls of 16 KiB, %zu waited at the "
      "caller, %llu read pauses\n",
      kCalls, queued,
      static_cast<unsigned long long>(b_.ep->counters().value("rpc.server.read_paused")));
}

}  // namespace
}  // namespace rmsg::testing
