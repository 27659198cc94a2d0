// What a server keeps per peer goes with the peer's session (review #4, RPC's part): many
// one-shot clients with distinct node ids, each reset when it leaves (lossy sessions reset
// on every disconnect), leave no per-peer entries, no dedupe entries and a bounded set of
// counter names (max_peer_counters; the rest are summed in rpc.peer.other.*).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "rpc/rpc_loopback_fixture.h"

namespace rmsg::testing {
namespace {

constexpr std::uint32_t kPut = 5;

TEST_F(RpcLoopbackTest, OneShotClientsLeaveNoPerPeerStateBehind) {
  RpcOptions ob = rpc_options(kB);
  ob.messenger.default_policy = SessionPolicy::lossy;
  ob.max_peer_counters = 16;
  start_b(ob);
  b_.ep->handle(kPut, [](const RpcRequest&, RpcResponder reply) { reply.ok(); }, {.dedupe = true});
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kClients = 1'000;  // ~4 ms a client under ASan: the bound shows as well
#else
  constexpr int kClients = 10'000;
#endif
  constexpr NodeId kFirst = 1000;
  std::size_t names_after_first = 0;
  int resets = 0;
  for (int i = 0; i < kClients; ++i) {
    const NodeId id = kFirst + static_cast<NodeId>(i);
    start(a_, kPortA, rpc_options(id));
    ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
    bool done = false;
    ASSERT_TRUE(a_.ep
                    ->call(kB, kPut, bytes_of("v"),
                           {.deadline = loop_->now() + std::chrono::seconds(5)},
                           [&](RpcResponse r) {
                             EXPECT_FALSE(r.error) << r.error.message();
                             done = true;
                           })
                    .ok());
    ASSERT_TRUE(run([&] { return done; }));
    a_.ep.reset();  // the client goes: B's lossy session with it resets
    ASSERT_TRUE(run([&] { return b_.count(SessionEvent::Kind::reset) == 1; }));
    b_.events.clear();
    ++resets;
    if (i == 32) names_after_first = b_.ep->counters().snapshot().size();
  }
  const auto st = RpcAccess::peer_state(*b_.ep);
  const std::size_t names = b_.ep->counters().snapshot().size();
  std::printf(
      "[ peers    ] %d one-shot clients: %zu peer entries, %zu dedupe entries, %zu counter names\n",
      kClients, st.peers, st.dedupe, names);
  EXPECT_EQ(resets, kClients);
  EXPECT_EQ(st.peers, 0u);
  EXPECT_EQ(st.dedupe, 0u);
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(names, names_after_first);  // 16 named peers and the "other" bucket, no more
  EXPECT_EQ(b_.counter("rpc.peer.other.served"), static_cast<std::uint64_t>(kClients - 16));
  EXPECT_EQ(b_.counter("rpc.peer." + std::to_string(kFirst) + ".served"), 1u);
  // A peer in the bucket reports the bucket's sums.
  EXPECT_EQ(b_.ep->peer_stats(kFirst)->served, 1u);
}

}  // namespace
}  // namespace rmsg::testing
