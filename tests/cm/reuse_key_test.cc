// ReuseKey: every parameter takes part in equality and the hash; the passive key leaves
// the peer out. The step-timeout errors are distinct codes that all mean "timed out".
#include <gtest/gtest.h>

#include <functional>
#include <unordered_set>
#include <vector>

#include "cm/manager_stats.h"
#include "rmsg/connection_manager.h"

namespace rmsg {
namespace {

ConnectionParams base_params() {
  ConnectionParams p;
  p.peer = SocketAddress::parse("10.0.0.1:7000").value();
  return p;
}

TEST(ReuseKey, EqualParamsGiveEqualKeysAndHashes) {
  const auto a = ReuseKey::from(base_params(), "rxe0", 1, false);
  const auto b = ReuseKey::from(base_params(), "rxe0", 1, false);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ReuseKeyHash{}(a), ReuseKeyHash{}(b));
}

TEST(ReuseKey, EveryParameterChangesTheKey) {
  const auto base = ReuseKey::from(base_params(), "rxe0", 1, false);
  std::vector<std::function<void(ConnectionParams&)>> changes = {
      [](ConnectionParams& p) { p.transport = Transport::tcp; },
      [](ConnectionParams& p) { p.peer = SocketAddress::parse("10.0.0.2:7000").value(); },
      [](ConnectionParams& p) { p.peer = SocketAddress::parse("10.0.0.1:7001").value(); },
      [](ConnectionParams& p) { p.rdma.send_block_size *= 2; },
      [](ConnectionParams& p) { p.rdma.send_block_count += 1; },
      [](ConnectionParams& p) { p.rdma.recv_block_size *= 2; },
      [](ConnectionParams& p) { p.rdma.recv_block_count += 1; },
      [](ConnectionParams& p) { p.rdma.inline_size = 64; },
      [](ConnectionParams& p) { p.service_level = 3; },
      [](ConnectionParams& p) { p.rdma.retry_count = 3; },
      [](ConnectionParams& p) { p.rdma.rnr_retry_count = 7; },
      [](ConnectionParams& p) { p.rdma.ack_timeout = 10; },
      [](ConnectionParams& p) { p.rdma.resolve_timeout = std::chrono::milliseconds(1); },
      [](ConnectionParams& p) { p.rdma.connect_timeout = std::chrono::milliseconds(1); },
  };
  std::unordered_set<ReuseKey, ReuseKeyHash> keys{base};
  for (std::size_t i = 0; i < changes.size(); ++i) {
    ConnectionParams p = base_params();
    changes[i](p);
    const auto k = ReuseKey::from(p, "rxe0", 1, false);
    EXPECT_NE(k, base) << "change " << i << ": " << k.to_string();
    EXPECT_TRUE(keys.insert(k).second) << "change " << i << " collides: " << k.to_string();
  }
  EXPECT_NE(ReuseKey::from(base_params(), "rxe1", 1, false), base);
  EXPECT_NE(ReuseKey::from(base_params(), "rxe0", 2, false), base);
}

TEST(ReuseKey, PassiveKeyIgnoresThePeer) {
  ConnectionParams other = base_params();
  other.peer = SocketAddress::parse("10.0.0.9:40000").value();
  const auto a = ReuseKey::from(base_params(), "rxe0", 1, true);
  const auto b = ReuseKey::from(other, "rxe0", 1, true);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.peer.valid());
  EXPECT_NE(a, ReuseKey::from(base_params(), "rxe0", 1, false));
}

TEST(ConnectErrors, StepTimeoutsAreDistinctAndAllTimedOut) {
  const std::error_code a = ConnectErrc::address_timeout;
  const std::error_code r = ConnectErrc::route_timeout;
  const std::error_code h = ConnectErrc::handshake_timeout;
  EXPECT_NE(a, r);
  EXPECT_NE(r, h);
  EXPECT_NE(a, h);
  for (const auto& ec : {a, r, h}) {
    EXPECT_TRUE(ec == std::errc::timed_out) << ec.message();
    EXPECT_NE(ec, make_error_code(Errc::timeout));
    EXPECT_FALSE(ec.message().empty());
  }
  EXPECT_EQ(cm::ManagerStats::cause(a), "address_timeout");
  EXPECT_EQ(cm::ManagerStats::cause(h), "handshake_timeout");
  EXPECT_EQ(cm::ManagerStats::cause(make_error_code(Errc::connection_refused)), "refused");
  EXPECT_EQ(cm::ManagerStats::cause(make_error_code(Errc::rejected)), "rejected");
}

TEST(ManagerStats, RecordsPhasesPerModeAndFailuresByCause) {
  cm::ManagerStats stats;
  ConnectReport r;
  r.reused = true;
  r.resolve = std::chrono::microseconds(10);
  r.resources = std::chrono::microseconds(0);
  r.handshake = std::chrono::microseconds(30);
  r.total = std::chrono::microseconds(45);
  stats.record(r, {});
  stats.record(r, make_error_code(ConnectErrc::route_timeout));
  EXPECT_EQ(stats.set().value("connects.ok"), 1u);
  EXPECT_EQ(stats.set().value("latency.rdma.reused.count"), 1u);
  EXPECT_EQ(stats.set().value("latency.rdma.reused.handshake_us"), 30u);
  EXPECT_EQ(stats.set().value("latency.rdma.fresh.count"), 0u);
  EXPECT_EQ(stats.set().value("connects.failed.route_timeout"), 1u);
}

}  // namespace
}  // namespace rmsg
