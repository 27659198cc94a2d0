// Establishment on real verbs: many connections and concurrent ones on one loop thread,
// and each failure reaching the callback as its own error, promptly.
#include <gtest/gtest.h>

#include <rdma/rdma_cma.h>

#include <iostream>
#include <string>
#include <vector>

#include "cm_rdma_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class CmSetup : public CmRdmaTest {};

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// Small rings: 200 structures per side must not pin much.
ConnectionParams small(ConnectionParams p) {
  p.rdma.send_block_size = p.rdma.recv_block_size = 1024;
  p.rdma.send_block_count = p.rdma.recv_block_count = 4;
  return p;
}

// Each client writes its index; the accepted side echoes nothing but must read it.
void ping_all(EventLoop& loop, std::vector<Stream>& clients, std::deque<Stream>& servers) {
  for (std::size_t i = 0; i < clients.size(); ++i) {
    const std::string m = "client-" + std::to_string(i) + ";";
    ASSERT_TRUE(clients[i].write(m.data(), m.size()).ok());
  }
  std::vector<std::string> got(servers.size());
  const bool all = loop.run_for(
      [&] {
        std::size_t complete = 0;
        for (std::size_t i = 0; i < servers.size(); ++i) {
          char buf[64];
          auto r = servers[i].read(buf, sizeof buf);
          if (r && r.value() > 0) got[i].append(buf, r.value());
          complete += !got[i].empty() && got[i].back() == ';';
        }
        return complete == servers.size();
      },
      30s);
  ASSERT_TRUE(all);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end()) << "a message arrived twice";
}

TEST_F(CmSetup, TwoHundredConnectionsOnOneLoopThread) {
  ASSERT_NO_FATAL_FAILURE(listen_managed(small(params())));
  const Census empty = take_census();
  constexpr int kTotal = 200;
  constexpr int kAtOnce = 10;
  const auto t0 = Clock::now();
  for (int round = 0; round < kTotal / kAtOnce; ++round) {
    std::vector<Stream> clients;
    int failures = 0;
    for (int i = 0; i < kAtOnce; ++i) {
      cm().connect(small(params()), [&](Result<Stream> r) {
        if (!r) {
          ++failures;
          ADD_FAILURE() << r.error().message();
          return;
        }
        clients.push_back(std::move(r).value());
      });
    }
    ASSERT_TRUE(loop().run_for(
        [&] {
          return static_cast<int>(clients.size()) + failures == kAtOnce &&
                 accepted_q_.size() == clients.size();
        },
        30s))
        << "round " << round;
    ASSERT_EQ(failures, 0);
    ASSERT_NO_FATAL_FAILURE(ping_all(loop(), clients, accepted_q_));
    clients.clear();  // abortive close, both sides
    accepted_q_.clear();
  }
  const auto took = ms_since(t0);
  std::printf(
      "[ time ] %d RDMA connections (client and server on one thread) set up, used and "
      "torn down in %lld ms; structures created %llu, reused %llu\n",
      kTotal, took, static_cast<unsigned long long>(counter("structures.created")),
      static_cast<unsigned long long>(counter("structures.reused")));
  EXPECT_EQ(counter("connects.ok"), static_cast<std::uint64_t>(kTotal));
  EXPECT_EQ(counter("structures.created") + counter("structures.reused"), 2u * kTotal);
  // Everything back: recycled and idle, or destroyed.
  const auto t1 = Clock::now();
  ASSERT_TRUE(loop().run_for([&] { return cm().recycling() == 0; }, 20s));
  std::printf("[ time ] last recycling done %lld ms later\n", ms_since(t1));
  cm().drop_idle();
  cm().counters().dump(std::cout, "  ");
  EXPECT_EQ(counter("structures.created"), counter("structures.destroyed"));
  const Census now = take_census();
  EXPECT_EQ(now, empty) << now.to_string();
}

TEST_F(CmSetup, ConcurrentConnectsToOnePeerThenAllReused) {
  ConnectionManagerOptions o;
  o.wait_timewait = false;
  ASSERT_NO_FATAL_FAILURE(make_manager(o));
  ASSERT_NO_FATAL_FAILURE(listen_managed(params()));
  constexpr int kConnects = 16;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<Stream> clients;
    int reused = 0;
    for (int i = 0; i < kConnects; ++i) {
      cm().connect(params(), [&](Result<Stream> r, const ConnectReport& rep) {
        ASSERT_TRUE(r.ok()) << r.error().message();
        reused += rep.reused;
        clients.push_back(std::move(r).value());
      });
    }
    EXPECT_EQ(cm().pending(), static_cast<std::size_t>(kConnects));
    ASSERT_TRUE(loop().run_for(
        [&] { return clients.size() == kConnects && accepted_q_.size() == kConnects; }, 30s));
    ASSERT_NO_FATAL_FAILURE(ping_all(loop(), clients, accepted_q_));
    EXPECT_EQ(reused, pass == 0 ? 0 : kConnects);
    clients.clear();
    accepted_q_.clear();
    ASSERT_TRUE(wait_idle(2 * kConnects));
  }
  EXPECT_EQ(counter("structures.created"), 2u * kConnects);
  EXPECT_EQ(counter("structures.reused"), 2u * kConnects);
}

TEST_F(CmSetup, NoListenerIsRefusedPromptly) {
  {
    auto l = rdma_listen(loop(), address(), test_options(), [](Stream) {});
    ASSERT_TRUE(l.ok()) << l.error().message();
    peer_ = address();
    peer_.set_port(l->port());
  }
  const auto t0 = Clock::now();
  ConnectReport report;
  auto r = connect_one(params(), &report);
  EXPECT_TRUE(r.is(Errc::connection_refused)) << (r ? "connected" : r.error().message());
  EXPECT_EQ(report.reject_status, 8);  // IB CM: invalid service id
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(counter("connects.failed.refused"), 1u);
  EXPECT_EQ(counter("structures.created"), counter("structures.destroyed"));
}

// A server that takes the connect request and then never answers (hung mid-handshake).
TEST_F(CmSetup, ServerSilentMidHandshakeGivesHandshakeTimeout) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* listen_id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP), 0);
  SocketAddress bind_to = address();
  ASSERT_EQ(rdma_bind_addr(listen_id, bind_to.sockaddr_ptr()), 0);
  ASSERT_EQ(rdma_listen(listen_id, 8), 0);
  peer_ = address();
  peer_.set_port(ntohs(rdma_get_src_port(listen_id)));
  ConnectionParams p = params();
  p.rdma.connect_timeout = 1000ms;
  const Census empty = take_census();
  const auto t0 = Clock::now();
  ConnectReport report;
  auto r = connect_one(p, &report);
  const auto took = ms_since(t0);
  EXPECT_EQ(r.error(), make_error_code(ConnectErrc::handshake_timeout))
      << (r ? "connected" : r.error().message());
  EXPECT_TRUE(r.error() == std::errc::timed_out);
  EXPECT_GE(took, 900);
  EXPECT_LT(took, 3000);
  EXPECT_EQ(counter("connects.failed.handshake_timeout"), 1u);
  // The request did reach the server: it is the reply that never came.
  rdma_cm_event* ev = nullptr;
  ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_CONNECT_REQUEST);
  rdma_cm_id* req_id = ev->id;
  rdma_ack_cm_event(ev);
  rdma_reject(req_id, nullptr, 0);
  rdma_destroy_id(req_id);
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(ch);
  loop().run_for([&] { return cm().recycling() == 0; }, 5s);
  EXPECT_EQ(take_census(), empty) << "the timed-out attempt left objects behind";
}

// An on-link address nobody answers ARP for: resolution cannot finish.
TEST_F(CmSetup, SilentAddressTimesOutInTheAddressStep) {
  auto host = address().host();
  host = host.substr(0, host.rfind('.') + 1) + "77";
  peer_ = SocketAddress::from_host_port(host, 7471).value();
  ConnectionParams p = params();
  p.rdma.resolve_timeout = 500ms;
  const auto t0 = Clock::now();
  auto r = connect_one(p);
  const auto took = ms_since(t0);
  EXPECT_EQ(r.error(), make_error_code(ConnectErrc::address_timeout))
      << (r ? "connected" : r.error().message());
  EXPECT_LT(took, 2000);
  EXPECT_EQ(counter("connects.failed.address_timeout"), 1u);
  EXPECT_EQ(counter("structures.created"), 0u) << "no structure before the route is known";
}

}  // namespace
}  // namespace rmsg::testing
