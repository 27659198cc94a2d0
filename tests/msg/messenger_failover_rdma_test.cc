// Failover over real rxe and TCP in the Soft-RoCE guest (docs/messenger.md, Failover): an
// rdma_preferred session carries a stream of RPCs and one-way messages while its RDMA
// connection is failed under it - (a) a synthetic QP_FATAL routed to the live stream's QP
// (verbs::route_async_event), on either side; (b) the acceptor's RDMA listener closed
// (probes are refused) and reopened on the same port. Every call completes once, every
// request and one-way message runs once and in order, the session switches at least
// twice. retry_count 6: rxe retries for ever at 7.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "kit/seed.h"
#include "msg/failover_streams.h"
#include "rpc/rpc_seams.h"
#include "verbs/seams.h"

namespace rmsg::testing {
namespace {

using Kind = SessionEvent::Kind;
using std::chrono::milliseconds;

struct Side {
  std::unique_ptr<RpcEndpoint> ep;
  FailoverStreams* streams = nullptr;  // owned by the messenger
  std::vector<SessionEvent> events;
  std::string rdma_address;
  std::string tcp_address;
  std::uint64_t counter(std::string_view name) const {
    return ep->messenger().counters().value(name);
  }
  std::optional<Transport> transport(NodeId peer) const {
    auto i = ep->messenger().session_info(peer);
    return i ? i->transport : std::nullopt;
  }
};

class MessengerFailoverRdmaTest : public ::testing::Test {
 protected:
  static constexpr NodeId kA = 1;
  static constexpr NodeId kB = 2;
  static constexpr std::uint32_t kEcho = 1;
  static constexpr std::uint32_t kNote = 2;

  void SetUp() override {
    const char* addr = std::getenv("RMSG_RDMA_ADDR");
    ASSERT_NE(addr, nullptr) << "RMSG_RDMA_ADDR is not set: run in the Soft-RoCE guest";
    host_ = addr;
    EventLoopOptions lo;
    lo.seed = seed_for("loop");
    loop_ = EventLoop::create(lo).value();
    start(a_, kA);
    start(b_, kB);
    b_.ep->handle(kEcho, [this](const RpcRequest& r, RpcResponder reply) {
      const std::uint64_t n = number(r.body);
      calls_in_order_ &= n == last_call_ + 1;
      last_call_ = n;
      ++runs_[n];
      reply.ok(r.body);
    });
    b_.ep->handle_oneway(kNote, [this](const RpcRequest& r) {
      const std::uint64_t n = number(r.body);
      notes_in_order_ &= n == last_note_ + 1;
      last_note_ = n;
    });
    PeerAddresses to_b{params(Transport::rdma), params(Transport::tcp),
                       TransportPolicy::rdma_preferred};
    to_b.rdma.peer = SocketAddress::parse(b_.rdma_address).value();
    to_b.tcp.peer = SocketAddress::parse(b_.tcp_address).value();
    ASSERT_TRUE(a_.ep->messenger().add_peer(kB, to_b).ok());
  }
  void TearDown() override {
    a_.ep.reset();
    b_.ep.reset();
    loop_->run_for([] { return false; }, milliseconds(20));
  }

  static ConnectionParams params(Transport t) {
    ConnectionParams p;
    p.transport = t;
    p.rdma.retry_count = 6;
    p.rdma.rnr_retry_count = 0;
    p.rdma.keepalive_interval = milliseconds(200);
    p.rdma.idle_timeout = milliseconds(2000);
    return p;
  }
  void start(Side& side, NodeId id) {
    RpcOptions o;
    o.messenger.node_id = id;
    o.messenger.handshake_timeout = std::chrono::seconds(2);
    o.messenger.backoff_initial = milliseconds(2);
    o.messenger.backoff_max = milliseconds(100);
    o.messenger.probe_backoff_initial = milliseconds(100);
    o.messenger.probe_backoff_max = milliseconds(400);
    auto streams = std::make_unique<FailoverStreams>(*loop_);
    side.streams = streams.get();
    Side* s = &side;
    auto ep = RpcAccess::create(*loop_, o, std::move(streams),
                                [s](SessionEvent e) { s->events.push_back(std::move(e)); });
    ASSERT_TRUE(ep.ok());
    side.ep = std::move(ep).value();
    const auto any = SocketAddress::from_host_port(host_, 0).value();
    auto r = side.ep->messenger().listen(any, params(Transport::rdma));
    ASSERT_TRUE(r.ok()) << r.error().message();
    side.rdma_address = r.value();
    auto t = side.ep->messenger().listen(any, params(Transport::tcp));
    ASSERT_TRUE(t.ok()) << t.error().message();
    side.tcp_address = t.value();
  }
  static std::uint64_t number(std::span<const std::byte> body) {
    std::uint64_t n = 0;
    if (body.size() >= 8) std::memcpy(&n, body.data(), 8);
    return n;
  }

  // Keeps 16 calls outstanding (each with a one-way message before it) until `done`.
  bool drive(const std::function<bool()>& done, Duration limit = std::chrono::seconds(10)) {
    return loop_->run_for(
        [&] {
          while (outstanding_ < 16) {
            const std::uint64_t n = ++sent_;
            std::vector<std::byte> body(64);
            std::memcpy(body.data(), &n, 8);
            if (!a_.ep->notify(kB, kNote, body).ok()) return true;
            auto r =
                a_.ep->call(kB, kEcho, body, {.deadline = loop_->now() + std::chrono::seconds(60)},
                            [this, n](RpcResponse resp) {
                              --outstanding_;
                              (resp.error || number(resp.body) != n ? bad_ : ok_) += 1;
                            });
            if (!r) {
              ADD_FAILURE() << r.error().message();
              return true;
            }
            ++outstanding_;
          }
          return done();
        },
        limit);
  }
  // Ends the traffic: every call answered.
  void finish() {
    const std::uint64_t total = sent_;
    ASSERT_TRUE(loop_->run_for([&] { return ok_ + bad_ == total; }, std::chrono::seconds(10)));
  }
  void fatal(Side& side) {
    const auto qps = side.streams->rdma_qps();
    ASSERT_EQ(qps.size(), 1u) << "one live RDMA stream expected";
    ibv_async_event ev{};
    ev.event_type = IBV_EVENT_QP_FATAL;
    ev.element.qp = qps[0];
    verbs::route_async_event(*loop_, qps[0]->context, ev);
  }
  void expect_exactly_once() {
    EXPECT_EQ(ok_, sent_);
    EXPECT_EQ(bad_, 0u);
    EXPECT_EQ(runs_.size(), sent_);
    for (const auto& [n, times] : runs_) ASSERT_EQ(times, 1) << "request " << n;
    EXPECT_TRUE(calls_in_order_);
    EXPECT_TRUE(notes_in_order_);
    EXPECT_EQ(last_note_, sent_);
    for (const Side* s : {&a_, &b_}) {
      for (const auto& e : s->events) EXPECT_NE(e.kind, Kind::reset);
    }
  }
  bool on(Transport t) const { return a_.transport(kB) == t && b_.transport(kA) == t; }

  std::string host_;
  std::unique_ptr<EventLoop> loop_;
  Side a_;
  Side b_;
  std::uint64_t sent_ = 0, ok_ = 0, bad_ = 0, last_call_ = 0, last_note_ = 0;
  std::size_t outstanding_ = 0;
  bool calls_in_order_ = true;
  bool notes_in_order_ = true;
  std::map<std::uint64_t, int> runs_;
};

TEST_F(MessengerFailoverRdmaTest, QpFatalOnEitherSideMovesToTcpAndBack) {
  ASSERT_TRUE(drive([&] { return ok_ >= 200 && on(Transport::rdma); }));
  std::uint64_t k = 0;
  for (Side* failing : {&a_, &b_}) {
    ++k;
    ASSERT_NO_FATAL_FAILURE(fatal(*failing));
    const std::uint64_t mark = ok_;
    // The first probe may win within 50 ms: count the switches, not the transport now.
    ASSERT_TRUE(drive([&] {
      return a_.counter("msg.switches.to_tcp") == k && b_.counter("msg.switches.to_tcp") == k;
    })) << "round "
        << k;
    ASSERT_TRUE(drive([&] {
      return a_.counter("msg.switches.to_rdma") == k && b_.counter("msg.switches.to_rdma") == k &&
             on(Transport::rdma) && ok_ >= mark + 300;
    })) << "round "
        << k;
  }
  finish();
  expect_exactly_once();
  EXPECT_EQ(a_.counter("msg.switches.to_tcp"), 2u);
  EXPECT_EQ(a_.counter("msg.switches.to_rdma"), 2u);
  EXPECT_EQ(b_.counter("msg.switches.to_tcp"), 2u);
  EXPECT_EQ(b_.counter("msg.switches.to_rdma"), 2u);
  EXPECT_GE(a_.counter("msg.probes"), 2u);
  std::printf("[ failover ] %llu calls, replayed across switches A %llu B %llu\n",
              static_cast<unsigned long long>(sent_),
              static_cast<unsigned long long>(a_.counter("msg.replayed_across_switch")),
              static_cast<unsigned long long>(b_.counter("msg.replayed_across_switch")));
}

TEST_F(MessengerFailoverRdmaTest, RdmaListenerClosedThenReopenedOnTheSamePort) {
  ASSERT_TRUE(drive([&] { return ok_ >= 200 && on(Transport::rdma); }));
  b_.streams->close_rdma_listener();
  ASSERT_NO_FATAL_FAILURE(fatal(a_));
  ASSERT_TRUE(drive([&] { return on(Transport::tcp); }));
  // The probes are refused and leave the TCP connection alone.
  const std::uint64_t mark = ok_;
  ASSERT_TRUE(drive([&] { return a_.counter("msg.probe_failures") >= 2 && ok_ >= mark + 200; }));
  EXPECT_TRUE(on(Transport::tcp));
  EXPECT_EQ(a_.counter("msg.switches.to_tcp"), 1u);
  ASSERT_TRUE(b_.streams->reopen_rdma_listener().ok());
  ASSERT_TRUE(drive([&] { return on(Transport::rdma) && ok_ >= mark + 400; }));
  finish();
  expect_exactly_once();
  EXPECT_EQ(a_.counter("msg.switches.to_rdma"), 1u);
  EXPECT_EQ(a_.counter("msg.disconnects"), 1u) << "only the failed RDMA connection";
}

}  // namespace
}  // namespace rmsg::testing
