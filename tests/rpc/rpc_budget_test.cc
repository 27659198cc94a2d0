// A call's budget end to end (review #8): a caller with no deadline (time_point::max())
// reaches the handler with no deadline, and hostile budgets from a raw peer mean no
// deadline too: the handler runs, with deadline max(), never refused as expired and with
// no signed overflow (this runs under UBSan in the ASan tier).
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "rpc/rpc_loopback_fixture.h"
#include "wire/rpc_wire.h"

namespace rmsg::testing {
namespace {

constexpr std::uint32_t kSee = 9;

class RpcBudgetTest : public RpcLoopbackTest {
 protected:
  void see_deadlines() {
    b_.ep->handle(kSee, [this](const RpcRequest& r, RpcResponder reply) {
      seen_.push_back(r.deadline);
      reply.ok();
    });
  }
  std::vector<Clock::time_point> seen_;
};

TEST_F(RpcBudgetTest, NoDeadlineReachesTheHandlerAsNone) {
  clock_->advance(std::chrono::hours(1));  // a clock well past its epoch
  RpcOptions ob = rpc_options(kB);
  ob.max_pending_requests_total = 1;  // the second request waits for room (then rechecked)
  start(a_, kPortA, rpc_options(kA));
  start_b(ob);
  ASSERT_TRUE(a_.ep->messenger().add_peer(kB, loopback_params(kPortB)).ok());
  see_deadlines();
  const CallId held = call(kHold, "x").value();
  std::vector<RpcResponse> got;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(a_.ep
                    ->call(kB, kSee, {}, {.deadline = Clock::time_point::max()},
                           [&](RpcResponse r) { got.push_back(std::move(r)); })
                    .ok());
  }
  ASSERT_TRUE(run([&] { return held_.size() == 1 && b_.counter("rpc.server.deferred") >= 1; }));
  held_.front().ok();
  ASSERT_TRUE(run([&] { return got.size() == 2 && completed(held); }));
  for (const RpcResponse& r : got) EXPECT_FALSE(r.error) << r.error.message();
  ASSERT_EQ(seen_.size(), 2u);
  for (const auto& d : seen_) EXPECT_EQ(d, Clock::time_point::max());
  EXPECT_EQ(b_.counter("rpc.server.expired"), 0u);
}

TEST_F(RpcBudgetTest, HostileBudgetsMeanNoDeadline) {
  clock_->advance(std::chrono::hours(1));
  start_b(rpc_options(kB));
  see_deadlines();
  std::vector<std::vector<std::byte>> got;
  auto m = MessengerAccess::create(
      *loop_, rpc_options(kA).messenger,
      std::make_unique<LoopbackStreams>(*loop_, std::make_shared<LoopbackFaults>(),
                                        std::make_shared<LoopbackFaults>()),
      [&](NodeId, std::span<const std::byte> p) { got.emplace_back(p.begin(), p.end()); }, {});
  ASSERT_TRUE(m.ok());
  auto& raw = *m.value();
  ASSERT_TRUE(raw.add_peer(kB, loopback_params(kPortB)).ok());
  const std::vector<std::uint64_t> budgets = {
      wire::kNoBudget - 1, std::uint64_t{1} << 63, std::uint64_t{9'223'372'036'854'775},
      std::uint64_t{9'223'372'036'854'776}, std::uint64_t{1} << 62};
  wire::RpcHeader h;
  h.kind = wire::RpcKind::request;
  h.word = kSee;
  for (std::size_t i = 0; i < budgets.size(); ++i) {
    h.id = i + 1;
    h.budget_us = budgets[i];
    ASSERT_TRUE(raw.send(kB, wire::encode_rpc(h, {})).ok());
  }
  ASSERT_TRUE(run([&] { return got.size() == budgets.size(); }));
  for (const auto& reply : got) {
    const auto r = wire::decode_rpc(reply);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, wire::RpcStatus::ok) << r->id;
  }
  ASSERT_EQ(seen_.size(), budgets.size());
  for (const auto& d : seen_) EXPECT_EQ(d, Clock::time_point::max());
  m.value().reset();
}

}  // namespace
}  // namespace rmsg::testing
