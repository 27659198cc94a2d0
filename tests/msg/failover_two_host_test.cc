// Failover across two guests (tests/softroce/run --two-host; CTest softroce_two_host): the
// real thing. The client (10.0.0.2) keeps RPCs and one-way messages going to the server
// (10.0.0.1) over an rdma_preferred session, then drops every RoCEv2 packet it sends
// (`tc ... u32 match ip dport 4791 0xffff action drop` on its eth0; rxe's same-device
// loopback bypasses tc, hence two guests): the RDMA connection fails by the transport's
// retries and the session moves to TCP; the probes fail while the filter stays; once it
// is removed a probe brings the session back to RDMA. The server checks that every
// request and one-way message ran once and in order; the client that every call
// completed. Detection is set by retry_count 6 and ack_timeout 14 (~0.8 s on rxe), with
// the RDMA stream's idle_timeout (1.5 s) and the messenger's (2 s) behind it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "rmsg/rpc.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kRdmaPort = 18620;
constexpr std::uint16_t kTcpPort = 18621;
constexpr NodeId kServer = 1;
constexpr NodeId kClient = 2;
constexpr std::uint32_t kEcho = 1, kNote = 2, kDone = 3;
constexpr auto kBootWindow = 180s;  // the guests boot side by side

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
double ms(Duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}
std::uint64_t number(std::span<const std::byte> body) {
  std::uint64_t n = 0;
  if (body.size() >= 8) std::memcpy(&n, body.data(), 8);
  return n;
}
ConnectionParams params(Transport t, const std::string& host, std::uint16_t port) {
  ConnectionParams p;
  p.transport = t;
  p.peer = SocketAddress::from_host_port(host, port).value();
  p.rdma.retry_count = 6;  // rxe retries for ever at 7
  p.rdma.ack_timeout = 14;
  p.rdma.keepalive_interval = 200ms;
  p.rdma.idle_timeout = 1500ms;
  return p;
}
RpcOptions options(NodeId id) {
  RpcOptions o;
  o.messenger.node_id = id;
  o.messenger.handshake_timeout = 1s;  // a probe into the filter fails after it
  o.messenger.backoff_initial = 5ms;
  o.messenger.backoff_max = 200ms;
  o.messenger.keepalive_interval = 200ms;
  o.messenger.idle_timeout = 2s;
  o.messenger.probe_backoff_initial = 200ms;
  o.messenger.probe_backoff_max = 800ms;
  return o;
}

class FailoverTwoHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    role_ = env("RMSG_RDMA_ROLE");
    ASSERT_TRUE(role_ == "server" || role_ == "client")
        << "RMSG_RDMA_ROLE='" << role_ << "': run me with tests/softroce/run --two-host";
    loop_ = EventLoop::create().value();
    tick_ = loop_->add_periodic(20ms, [] {});  // re-evaluates run_for's predicates
  }
  void TearDown() override {
    ep_.reset();
    if (loop_) loop_->cancel_timer(tick_);
  }
  void serve();
  void drive_client();

  std::string role_;
  std::unique_ptr<EventLoop> loop_;
  TimerId tick_ = 0;
  std::unique_ptr<RpcEndpoint> ep_;
  std::vector<SessionEvent> events_;
  std::vector<Clock::time_point> event_at_;  // when each of events_ reached us
};

void FailoverTwoHosts::serve() {
  auto ep = RpcEndpoint::create(*loop_, options(kServer),
                                [this](SessionEvent e) { events_.push_back(std::move(e)); });
  ASSERT_TRUE(ep.ok());
  ep_ = std::move(ep).value();
  const std::string me = env("RMSG_RDMA_ADDR");
  for (auto [t, port] :
       {std::pair{Transport::rdma, kRdmaPort}, std::pair{Transport::tcp, kTcpPort}}) {
    const auto p = params(t, me, port);
    auto l = ep_->messenger().listen(p.peer, p);
    ASSERT_TRUE(l.ok()) << l.error().message();
  }
  std::uint64_t last_call = 0, last_note = 0, done = 0;
  bool calls_in_order = true, notes_in_order = true;
  std::map<std::uint64_t, int> runs;
  ep_->handle(kEcho, [&](const RpcRequest& r, RpcResponder reply) {
    const std::uint64_t n = number(r.body);
    calls_in_order &= n == last_call + 1;
    last_call = n;
    ++runs[n];
    reply.ok(r.body);
  });
  ep_->handle_oneway(kNote, [&](const RpcRequest& r) {
    const std::uint64_t n = number(r.body);
    notes_in_order &= n == last_note + 1;
    last_note = n;
  });
  ep_->handle_oneway(kDone, [&](const RpcRequest& r) { done = number(r.body); });
  ASSERT_TRUE(loop_->run_for([&] { return done != 0; }, kBootWindow + 120s))
      << "no end from the client; calls " << last_call;
  loop_->run_for([] { return false; }, 300ms);  // the last acks go out
  const auto& c = ep_->messenger().counters();
  std::printf("[ server   ] %llu calls, switches to_tcp %llu to_rdma %llu, replayed %llu\n",
              static_cast<unsigned long long>(done),
              static_cast<unsigned long long>(c.value("msg.switches.to_tcp")),
              static_cast<unsigned long long>(c.value("msg.switches.to_rdma")),
              static_cast<unsigned long long>(c.value("msg.replayed_across_switch")));
  EXPECT_EQ(last_call, done);
  EXPECT_EQ(last_note, done);
  EXPECT_EQ(runs.size(), done);
  for (const auto& [n, times] : runs) ASSERT_EQ(times, 1) << "request " << n;
  EXPECT_TRUE(calls_in_order);
  EXPECT_TRUE(notes_in_order);
  EXPECT_GE(c.value("msg.switches.to_tcp"), 1u);
  EXPECT_GE(c.value("msg.switches.to_rdma"), 1u);
  for (const auto& e : events_) EXPECT_NE(e.kind, SessionEvent::Kind::reset);
}

void FailoverTwoHosts::drive_client() {
  auto ep = RpcEndpoint::create(*loop_, options(kClient), [this](SessionEvent e) {
    events_.push_back(std::move(e));
    event_at_.push_back(loop_->now());
  });
  ASSERT_TRUE(ep.ok());
  ep_ = std::move(ep).value();
  Messenger& m = ep_->messenger();
  const std::string server = env("RMSG_RDMA_PEER_ADDR");
  ASSERT_TRUE(m.add_peer(kServer, PeerAddresses{params(Transport::rdma, server, kRdmaPort),
                                                params(Transport::tcp, server, kTcpPort),
                                                TransportPolicy::rdma_preferred})
                  .ok());
  std::uint64_t sent = 0, ok = 0, bad = 0;
  std::size_t outstanding = 0;
  Clock::time_point last_done{};
  Duration max_gap{};
  std::vector<Clock::time_point> done_at;  // every completion, in order
  auto on = [&](Transport t) {
    auto i = m.session_info(kServer);
    return i && i->transport == t;
  };
  auto drive = [&](const std::function<bool()>& until, Duration limit) {
    return loop_->run_for(
        [&] {
          while (outstanding < 16) {
            const std::uint64_t n = ++sent;
            std::vector<std::byte> body(64);
            std::memcpy(body.data(), &n, 8);
            if (!ep_->notify(kServer, kNote, body).ok()) return true;
            auto r = ep_->call(kServer, kEcho, body, {.deadline = loop_->now() + 120s},
                               [&, n](RpcResponse resp) {
                                 --outstanding;
                                 (resp.error || number(resp.body) != n ? bad : ok) += 1;
                                 const auto now = loop_->now();
                                 if (last_done != Clock::time_point{}) {
                                   max_gap = std::max(max_gap, now - last_done);
                                 }
                                 last_done = now;
                                 done_at.push_back(now);
                               });
            if (!r) return true;
            ++outstanding;
          }
          return until();
        },
        limit);
  };
  // The server boots alongside: the first connects are refused until it listens.
  ASSERT_TRUE(drive([&] { return on(Transport::rdma) && ok >= 500; }, kBootWindow));
  // tc runs on a thread of its own (a process start takes ~1 s in the guest) while the
  // calls go on: the pauses measured are the session's, not the test's.
  auto shell = [&](const char* cmd, Clock::time_point& started, Clock::time_point& finished) {
    started = loop_->now();
    auto f = std::async(std::launch::async, [cmd] { return std::system(cmd); });
    const bool done = drive([&] { return f.wait_for(0s) == std::future_status::ready; }, 30s);
    finished = loop_->now();
    return done ? f.get() : -1;
  };
  max_gap = {};
  // The boot may already have switched (RDMA refused while only TCP listened, then a
  // probe): count this test's switches from here.
  const std::uint64_t to_tcp0 = m.counters().value("msg.switches.to_tcp");
  const std::uint64_t to_rdma0 = m.counters().value("msg.switches.to_rdma");
  Clock::time_point before_tc, after_tc;
  ASSERT_EQ(shell("tc qdisc add dev eth0 root handle 1: prio && tc filter add dev eth0 parent 1: "
                  "protocol ip prio 1 u32 match ip dport 4791 0xffff action drop",
                  before_tc, after_tc),
            0)
      << "tc (iproute2) in the guest";
  ASSERT_TRUE(drive([&] { return on(Transport::tcp); }, 20s)) << "no switch to TCP";
  const auto on_tcp = loop_->now();
  const std::uint64_t mark = ok;
  ASSERT_TRUE(drive(
      [&] { return m.counters().value("msg.probe_failures") >= 1 && ok >= mark + 300; }, 30s));
  EXPECT_TRUE(on(Transport::tcp)) << "a probe got through the filter";
  Clock::time_point before_del, after_del;
  ASSERT_EQ(shell("tc qdisc del dev eth0 root", before_del, after_del), 0);
  ASSERT_TRUE(drive([&] { return on(Transport::rdma); }, 30s)) << "no switch back to RDMA";
  const auto back = loop_->now();
  const std::uint64_t mark2 = ok;
  ASSERT_TRUE(drive([&] { return ok >= mark2 + 300; }, 30s));
  const std::uint64_t total = sent;
  ASSERT_TRUE(loop_->run_for([&] { return ok + bad == total; }, 30s));
  std::vector<std::byte> body(8);
  std::memcpy(body.data(), &total, 8);
  ASSERT_TRUE(ep_->notify(kServer, kDone, body).ok());
  ASSERT_TRUE(loop_->run_for([&] { return m.session_info(kServer)->queued == 0; }, 10s));
  const auto& c = m.counters();
  std::printf(
      "[ failover ] %llu calls; RDMA dropped -> TCP after %.0f-%.0f ms; filter removed -> "
      "RDMA after %.0f-%.0f ms; max pause %.0f ms; switches to_tcp %llu to_rdma %llu; probes %llu "
      "(%llu failed); replayed %llu\n",
      static_cast<unsigned long long>(total), ms(on_tcp - after_tc), ms(on_tcp - before_tc),
      ms(back - after_del), ms(back - before_del), ms(max_gap),
      static_cast<unsigned long long>(c.value("msg.switches.to_tcp")),
      static_cast<unsigned long long>(c.value("msg.switches.to_rdma")),
      static_cast<unsigned long long>(c.value("msg.probes")),
      static_cast<unsigned long long>(c.value("msg.probe_failures")),
      static_cast<unsigned long long>(c.value("msg.replayed_across_switch")));
  for (const auto& e : events_) {
    if (e.kind == SessionEvent::Kind::switched) {
      std::printf("[ switched ] to %s (%s)\n", to_string(e.transport), e.error.message().c_str());
    }
  }
  // The pause around the switch to TCP, split: detection (the last completion before the
  // session's `disconnected` event to that event) and the reconnect (from it to the first
  // completion after the switch's welcome).
  for (std::size_t i = 0; i < events_.size(); ++i) {
    if (events_[i].kind != SessionEvent::Kind::disconnected || event_at_[i] < before_tc) continue;
    const auto lost_at = event_at_[i];
    auto after = std::upper_bound(done_at.begin(), done_at.end(), lost_at);
    Clock::time_point welcome{};
    for (const auto& e : events_) {
      if (e.kind == SessionEvent::Kind::switched && e.transport == Transport::tcp &&
          e.time >= lost_at) {
        welcome = e.time;
        break;
      }
    }
    if (after == done_at.begin() || welcome == Clock::time_point{}) break;
    const auto first = std::upper_bound(done_at.begin(), done_at.end(), welcome);
    std::printf(
        "[ detect   ] %.0f ms from the last completion over RDMA to the disconnect (%s); "
        "%.1f ms to the welcome over TCP, %.1f ms to the first reply after it\n",
        ms(lost_at - *(after - 1)), events_[i].error.message().c_str(), ms(welcome - lost_at),
        first == done_at.end() ? -1.0 : ms(*first - lost_at));
    break;
  }
  EXPECT_EQ(ok, total);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(c.value("msg.switches.to_tcp") - to_tcp0, 1u);
  EXPECT_EQ(c.value("msg.switches.to_rdma") - to_rdma0, 1u);
  for (const auto& e : events_) EXPECT_NE(e.kind, SessionEvent::Kind::reset);
}

TEST_F(FailoverTwoHosts, DroppedRoceMovesTheSessionToTcpAndBack) {
  if (role_ == "server") {
    serve();
  } else {
    drive_client();
  }
}

}  // namespace
}  // namespace rmsg::testing
