// Failover (docs/messenger.md, "Failover") over loopback streams with a manual clock: the
// seam's factory gives each connection the "transport" its params name (RDMA and TCP
// listen on their own ports, with their own fault injectors), so the policy logic runs on
// the host: a failing RDMA connection, RDMA refused, failing probes, both sides preferring
// RDMA, and a switch in the middle of a replay. Every message once and in order.
#include <gtest/gtest.h>

#include <memory>

#include "kit/seed.h"
#include "msg/msg_harness.h"

namespace rmsg::testing {
namespace {

using Kind = SessionEvent::Kind;
using std::chrono::milliseconds;

struct Faults {
  std::shared_ptr<LoopbackFaults> rdma = std::make_shared<LoopbackFaults>();
  std::shared_ptr<LoopbackFaults> tcp = std::make_shared<LoopbackFaults>();
  const std::shared_ptr<LoopbackFaults>& of(Transport t) const {
    return t == Transport::rdma ? rdma : tcp;
  }
};

// Loopback streams whose faults follow the params' transport field.
class TwoTransportStreams final : public StreamFactory {
 public:
  TwoTransportStreams(EventLoop& loop, Faults connect, Faults accept)
      : loop_(loop), connect_(std::move(connect)), accept_(std::move(accept)) {}
  void connect(const ConnectionParams& params, ConnectCallback done) override {
    loopback_connect(loop_, "lo", params.peer.port(), {.faults = connect_.of(params.transport)},
                     std::move(done));
  }
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept) override {
    return loopback_listen(loop_, "lo", address.port(), {.faults = accept_.of(params.transport)},
                           std::move(on_accept));
  }

 private:
  EventLoop& loop_;
  Faults connect_;
  Faults accept_;
};

ConnectionParams params(Transport t, std::uint16_t port) {
  ConnectionParams p = loopback_params(port);
  p.transport = t;
  return p;
}

class MessengerFailoverTest : public ::testing::Test {
 protected:
  static constexpr NodeId kA = 1;
  static constexpr NodeId kB = 2;
  struct Side {
    Node node;
    Faults connect;
    Faults accept;
    std::uint16_t rdma_port = 0;
    std::uint16_t tcp_port = 0;
  };

  void SetUp() override {
    auto l = EventLoop::create({.clock = clock_, .seed = seed_for("loop")});
    ASSERT_TRUE(l.ok());
    loop_ = std::move(l).value();
    a_.rdma_port = 7101;
    a_.tcp_port = 7102;
    b_.rdma_port = 7201;
    b_.tcp_port = 7202;
  }
  void TearDown() override {
    if (traffic_ != 0) loop_->cancel_timer(traffic_);
    // A Release build refuses and counts what a Debug build asserts on.
    for (const Side* s : {&a_, &b_}) {
      if (s->node.m) {
        EXPECT_EQ(s->node.counter("msg.illegal_transitions"), 0u);
      }
    }
    a_.node.m.reset();
    b_.node.m.reset();
    loop_->run_for([] { return false; }, milliseconds(1));
  }

  MessengerOptions options(NodeId id) const {
    MessengerOptions o;
    o.node_id = id;
    o.handshake_timeout = std::chrono::seconds(1);
    o.backoff_initial = milliseconds(10);
    o.backoff_max = milliseconds(200);
    o.probe_backoff_initial = milliseconds(100);
    o.probe_backoff_max = milliseconds(1600);
    return o;
  }
  void start(Side& side, NodeId id) {
    Node* n = &side.node;
    auto m = MessengerAccess::create(
        *loop_, options(id),
        std::make_unique<TwoTransportStreams>(*loop_, side.connect, side.accept),
        [n](NodeId from, std::span<const std::byte> p) { n->ledger.on_message(from, p); },
        [n](SessionEvent e) { n->on_event(std::move(e)); });
    ASSERT_TRUE(m.ok());
    side.node.m = std::move(m).value();
    const auto r = params(Transport::rdma, side.rdma_port);
    const auto t = params(Transport::tcp, side.tcp_port);
    ASSERT_TRUE(side.node.m->listen(r.peer, r).ok());
    ASSERT_TRUE(side.node.m->listen(t.peer, t).ok());
  }
  static PeerAddresses addresses(const Side& to) {
    return {params(Transport::rdma, to.rdma_port), params(Transport::tcp, to.tcp_port),
            TransportPolicy::rdma_preferred};
  }
  void start_both(bool both_ways = false) {
    start(a_, kA);
    start(b_, kB);
    ASSERT_TRUE(a_.node.m->add_peer(kB, addresses(b_)).ok());
    if (both_ways) {
      ASSERT_TRUE(b_.node.m->add_peer(kA, addresses(a_)).ok());
    }
  }

  // A steady stream both ways: one message each way per millisecond, `n` in all.
  void start_traffic(int n) {
    traffic_left_ += n;
    if (traffic_ != 0) return;
    traffic_ = loop_->add_periodic(milliseconds(1), [this] {
      if (traffic_left_ == 0) return;
      --traffic_left_;
      ASSERT_TRUE(a_.node.send_next(kB).ok());
      ASSERT_TRUE(b_.node.send_next(kA).ok());
    });
  }
  bool all_delivered() {
    return traffic_left_ == 0 && b_.node.ledger.last[kA] == a_.node.next_index[kB] &&
           a_.node.ledger.last[kB] == b_.node.next_index[kA] &&
           a_.node.m->session_info(kB).value_or(Messenger::SessionInfo{}).queued == 0 &&
           b_.node.m->session_info(kA).value_or(Messenger::SessionInfo{}).queued == 0;
  }
  std::optional<Transport> transport(Side& from, NodeId to) {
    auto i = from.node.m->session_info(to);
    return i ? i->transport : std::nullopt;
  }
  bool run(const std::function<bool()>& done, Duration limit = std::chrono::seconds(30)) {
    return loop_->run_for(done, limit);
  }
  void expect_clean() {
    expect_exactly_once(a_.node, kA, b_.node, kB);
    expect_exactly_once(b_.node, kB, a_.node, kA);
    EXPECT_EQ(a_.node.count(Kind::reset) + b_.node.count(Kind::reset), 0);
    EXPECT_TRUE(a_.node.handed_back.empty());
    EXPECT_TRUE(b_.node.handed_back.empty());
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::unique_ptr<EventLoop> loop_;
  Side a_;
  Side b_;
  TimerId traffic_ = 0;
  int traffic_left_ = 0;
};

TEST_F(MessengerFailoverTest, RdmaFailingMidStreamMovesToTcpAndBack) {
  start_both();
  // Messages spend 2 ms on the RDMA link: some are in flight when it dies.
  a_.connect.rdma->delay(milliseconds(2));
  b_.accept.rdma->delay(milliseconds(2));
  start_traffic(400);
  ASSERT_TRUE(run([&] { return b_.node.ledger.last[kA] >= 50; }));
  EXPECT_EQ(transport(a_, kB), Transport::rdma);
  EXPECT_EQ(transport(b_, kA), Transport::rdma);
  a_.connect.rdma->reset();  // the RDMA connection dies under the stream of messages
  ASSERT_TRUE(run([&] { return transport(a_, kB) == Transport::tcp; }));
  EXPECT_EQ(a_.node.counter("msg.switches.to_tcp"), 1u);
  EXPECT_GE(
      a_.node.counter("msg.replayed_across_switch") + b_.node.counter("msg.replayed_across_switch"),
      1u);
  ASSERT_TRUE(run([&] { return transport(a_, kB) == Transport::rdma; }));
  ASSERT_TRUE(run([&] { return all_delivered(); }));
  EXPECT_EQ(transport(b_, kA), Transport::rdma);
  EXPECT_EQ(a_.node.counter("msg.switches.to_rdma"), 1u);
  EXPECT_EQ(b_.node.counter("msg.switches.to_tcp"), 1u);
  EXPECT_EQ(b_.node.counter("msg.switches.to_rdma"), 1u);
  EXPECT_EQ(a_.node.counter("msg.probes"), 1u);
  EXPECT_EQ(a_.node.counter("msg.probe_failures"), 0u);
  EXPECT_EQ(a_.node.count(Kind::switched), 2);
  ASSERT_GE(a_.node.events.size(), 2u);
  std::vector<SessionEvent> sw;
  for (const auto& e : a_.node.events) {
    if (e.kind == Kind::switched) sw.push_back(e);
  }
  ASSERT_EQ(sw.size(), 2u);
  EXPECT_EQ(sw[0].transport, Transport::tcp);
  EXPECT_EQ(sw[0].error, make_error_code(Errc::connection_reset));
  EXPECT_EQ(sw[1].transport, Transport::rdma);
  EXPECT_EQ(sw[1].error, make_error_code(MessengerErrc::replaced));
  EXPECT_GT(sw[1].time, sw[0].time);
  // The probe replaced the TCP connection on both sides: one replacement each.
  EXPECT_EQ(a_.node.counter("msg.replaced"), 1u);
  EXPECT_EQ(b_.node.counter("msg.replaced"), 1u);
  expect_clean();
}

TEST_F(MessengerFailoverTest, RdmaRefusedFallsBackToTcpAtOnceAndProbesBackOff) {
  start(a_, kA);
  start(b_, kB);
  // The first attempt and the first five probes are refused; the sixth probe gets through.
  a_.connect.rdma->fail_connects(make_error_code(Errc::connection_refused), 6);
  ASSERT_TRUE(a_.node.m->add_peer(kB, addresses(b_)).ok());
  const auto t0 = loop_->now();
  start_traffic(3000);
  ASSERT_TRUE(run([&] { return transport(a_, kB) == Transport::tcp; }));
  // No backoff before the first fallback (backoff_initial would be >= 5 ms).
  EXPECT_LT(loop_->now() - t0, milliseconds(5));
  EXPECT_EQ(a_.node.count(Kind::failed), 1);
  // The probes back off: 100, 200, 400, 800, 1600 ms (each jittered down to half), then
  // the sixth succeeds: at least 1.55 s, at most 3.1 s + 1.6 s after the fallback.
  ASSERT_TRUE(run([&] { return transport(a_, kB) == Transport::rdma; }));
  const auto back = loop_->now() - t0;
  EXPECT_GE(back, milliseconds(1550 + 800));
  EXPECT_LE(back, milliseconds(3100 + 1600 + 50));
  EXPECT_EQ(a_.node.counter("msg.probes"), 6u);
  EXPECT_EQ(a_.node.counter("msg.probe_failures"), 5u);
  EXPECT_EQ(a_.node.counter("msg.disconnects"), 0u) << "a failed probe leaves TCP alone";
  EXPECT_EQ(a_.node.counter("msg.switches.to_rdma"), 1u);
  EXPECT_EQ(a_.node.counter("msg.switches.to_tcp"), 0u) << "TCP was the first connection";
  ASSERT_TRUE(run([&] { return all_delivered(); }));
  expect_clean();
}

TEST_F(MessengerFailoverTest, BothSidesPreferringRdmaEndOnOneRdmaConnection) {
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    start_both(/*both_ways=*/true);
    start_traffic(300);
    ASSERT_TRUE(run(
        [&] { return b_.node.ledger.last[kA] >= static_cast<std::uint64_t>(20 + 50 * round); }));
    a_.connect.rdma->reset();
    b_.connect.rdma->reset();
    a_.accept.rdma->reset();
    b_.accept.rdma->reset();
    // RDMA refused for a while on both sides: both fall back and probe.
    a_.connect.rdma->fail_connects(make_error_code(Errc::connection_refused), 1 + round);
    b_.connect.rdma->fail_connects(make_error_code(Errc::connection_refused), 2);
    ASSERT_TRUE(run([&] {
      return transport(a_, kB) == Transport::rdma && transport(b_, kA) == Transport::rdma &&
             all_delivered();
    }));
    // Settled: nothing flaps any more.
    const auto opened = a_.node.counter("msg.opened") + b_.node.counter("msg.opened");
    loop_->run_for([] { return false; }, std::chrono::seconds(5));
    EXPECT_EQ(a_.node.counter("msg.opened") + b_.node.counter("msg.opened"), opened);
    EXPECT_EQ(transport(a_, kB), Transport::rdma);
    EXPECT_GE(a_.node.counter("msg.switches.to_tcp"), 1u);
    EXPECT_GE(a_.node.counter("msg.switches.to_rdma"), 1u);
    expect_clean();
    if (traffic_ != 0) loop_->cancel_timer(traffic_);
    traffic_ = 0;
    a_.node.m.reset();
    b_.node.m.reset();
    const auto ra = a_.rdma_port, ta = a_.tcp_port, rb = b_.rdma_port, tb = b_.tcp_port;
    a_ = Side{};
    b_ = Side{};
    a_.rdma_port = ra, a_.tcp_port = ta, b_.rdma_port = rb, b_.tcp_port = tb;
  }
}

TEST_F(MessengerFailoverTest, SwitchBackInTheMiddleOfAReplay) {
  start_both();
  // Slow TCP: what goes over it takes 300 ms, so the replay after the fallback is still in
  // flight when the first probe (after 50..100 ms) moves the session back to RDMA.
  a_.connect.tcp->delay(milliseconds(300));
  b_.accept.tcp->delay(milliseconds(300));
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return transport(a_, kB) == Transport::rdma; }));
  // A backlog written on RDMA and not yet acknowledged when it dies.
  a_.connect.rdma->delay(milliseconds(20));
  b_.accept.rdma->delay(milliseconds(20));
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(a_.node.send_next(kB).ok());
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(b_.node.send_next(kA).ok());
  ASSERT_TRUE(run([&] { return a_.node.m->session_info(kB)->in_flight > 0; }));
  a_.connect.rdma->reset();
  ASSERT_TRUE(run([&] { return transport(a_, kB) == Transport::tcp; }));
  const auto replayed = a_.node.counter("msg.replayed_across_switch");
  EXPECT_GT(replayed, 0u);
  ASSERT_TRUE(run([&] { return transport(a_, kB) == Transport::rdma; }));
  EXPECT_LT(b_.node.ledger.last[kA], 501u) << "the replay was not done when the probe won";
  EXPECT_GT(a_.node.counter("msg.replayed_across_switch"), replayed);
  ASSERT_TRUE(run([&] { return all_delivered(); }));
  EXPECT_EQ(a_.node.counter("msg.switches.to_rdma"), 1u);
  expect_clean();
}

}  // namespace
}  // namespace rmsg::testing
