// A messenger over two loops on two threads, over RDMA in the Soft-RoCE guest: every peer
// only connects in, so each connection's connect request arrives on loop 0's listener and
// must be routed (ConnectionManager: affinity, AcceptRouter, accept_routed) to the loop
// that owns the peer's session. If one were accepted on the wrong loop, its session would
// be made there: dispatch would run on another thread than loop_of(peer)'s, and a second
// session would appear once the owner's own sends connect. retry_count 6: rxe retries for
// ever at 7.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rmsg/loop_threads.h"
#include "rmsg/messenger.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr NodeId kHub = 1;
constexpr int kPeers = 8;
constexpr std::uint64_t kEach = 50;  // each way, per peer

ConnectionParams rdma_to(const std::string& address) {
  ConnectionParams p;
  p.transport = Transport::rdma;
  p.peer = SocketAddress::parse(address).value();
  p.rdma.retry_count = 6;
  p.rdma.rnr_retry_count = 0;
  return p;
}

std::vector<std::byte> numbered(std::uint64_t n) {
  std::vector<std::byte> p(64, std::byte{0x33});
  std::memcpy(p.data(), &n, sizeof n);
  return p;
}

std::uint64_t number(std::span<const std::byte> p) {
  std::uint64_t n = 0;
  if (p.size() == 64) std::memcpy(&n, p.data(), sizeof n);
  return n;
}

struct Tally {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t delivered = 0;
  std::uint64_t out_of_order = 0;
  std::uint64_t wrong_thread = 0;
  std::vector<std::uint64_t> last_at_hub = std::vector<std::uint64_t>(kPeers + 2, 0);
  std::vector<std::uint64_t> last_at_peer = std::vector<std::uint64_t>(kPeers + 2, 0);
  void note(std::vector<std::uint64_t>& last, NodeId who, std::span<const std::byte> p,
            bool right_thread) {
    const std::lock_guard lock(mu);
    if (number(p) != last[who] + 1) ++out_of_order;
    last[who] = number(p);
    if (!right_thread) ++wrong_thread;
    ++delivered;
    cv.notify_all();
  }
};

TEST(MessengerRdmaLoops, ConnectsAreAcceptedOnTheLoopThatOwnsTheSession) {
  const char* host = std::getenv("RMSG_RDMA_ADDR");
  ASSERT_NE(host, nullptr) << "RMSG_RDMA_ADDR is not set: run in the Soft-RoCE guest";
  Tally tally;
  auto hub_loops = LoopThreads::create(2).value();
  auto peer_loops = LoopThreads::create(2).value();
  std::unique_ptr<Messenger> hub;
  MessengerOptions ho;
  ho.node_id = kHub;
  hub = Messenger::create(hub_loops->loops(), ho, [&](NodeId from, std::span<const std::byte> p) {
          tally.note(tally.last_at_hub, from, p, hub->loop_of(from).in_loop_thread());
        }).value();
  // Before the loops run: listen registers loop 1's manager as a routing target.
  const auto any = SocketAddress::from_host_port(host, 0).value();
  const std::string hub_addr = hub->listen(any, rdma_to(std::string(host) + ":1")).value();
  std::vector<std::unique_ptr<Messenger>> peers;
  for (int i = 0; i < kPeers; ++i) {
    const NodeId id = 2 + static_cast<NodeId>(i);
    MessengerOptions po;
    po.node_id = id;
    EventLoop& loop = peer_loops->loop(static_cast<std::size_t>(i) % 2);
    auto m = Messenger::create(loop, po, [&tally, id, &loop](NodeId, std::span<const std::byte> p) {
               tally.note(tally.last_at_peer, id, p, loop.in_loop_thread());
             }).value();
    ASSERT_TRUE(m->add_peer(kHub, rdma_to(hub_addr)).ok());
    peers.push_back(std::move(m));
  }
  std::size_t owners[2] = {0, 0};
  for (int i = 0; i < kPeers; ++i) {
    owners[&hub->loop_of(2 + static_cast<NodeId>(i)) == &hub_loops->loop(0) ? 0 : 1]++;
  }
  ASSERT_GT(owners[0], 0u);
  ASSERT_GT(owners[1], 0u);
  hub_loops->start();
  peer_loops->start();
  // The peers connect in; the hub's replies are queued in sessions that wait for them.
  for (std::uint64_t n = 1; n <= kEach; ++n) {
    for (int i = 0; i < kPeers; ++i) {
      ASSERT_TRUE(peers[static_cast<std::size_t>(i)]->send(kHub, numbered(n)).ok());
      ASSERT_TRUE(hub->send(2 + static_cast<NodeId>(i), numbered(n)).ok());
    }
  }
  {
    std::unique_lock lock(tally.mu);
    ASSERT_TRUE(tally.cv.wait_for(lock, 60s, [&] { return tally.delivered == 2 * kPeers * kEach; }))
        << tally.delivered;
  }
  EXPECT_EQ(tally.out_of_order, 0u);
  EXPECT_EQ(tally.wrong_thread, 0u);
  for (int i = 0; i < kPeers; ++i) {
    EXPECT_EQ(tally.last_at_hub[2 + static_cast<std::size_t>(i)], kEach);
    EXPECT_EQ(tally.last_at_peer[2 + static_cast<std::size_t>(i)], kEach);
  }
  // One session per peer, each on its owner's loop.
  EXPECT_EQ(hub->counter_total("msg.sessions"), static_cast<std::uint64_t>(kPeers));
  std::uint64_t on_loop[2] = {0, 0};
  hub_loops->run_sync(0, [&] { on_loop[0] = hub->counters(0).value("msg.sessions"); });
  hub_loops->run_sync(1, [&] { on_loop[1] = hub->counters(1).value("msg.sessions"); });
  EXPECT_EQ(on_loop[0], owners[0]);
  EXPECT_EQ(on_loop[1], owners[1]);
  EXPECT_EQ(hub->counter_total("msg.resets"), 0u);
  hub.reset();
  peers.clear();
}

// #9: a connection the hub accepts over RDMA on either loop is recorded as RDMA. Both sides
// add each other rdma_preferred with a short probe backoff: a session that believed it was
// on TCP would probe RDMA (replacing a working connection) within a few hundred ms. Any
// session event after the first connections ends the wait early.
TEST(MessengerRdmaLoops, AcceptedRdmaConnectionsAreRecordedAsRdmaAndNotProbed) {
  const char* host = std::getenv("RMSG_RDMA_ADDR");
  ASSERT_NE(host, nullptr) << "RMSG_RDMA_ADDR is not set: run in the Soft-RoCE guest";
  struct Events {
    std::mutex mu;
    std::condition_variable cv;
    int connected = 0;
    int other = 0;  // anything but the first connections: switched, failed, disconnected...
    std::uint64_t delivered = 0;
    void on(const SessionEvent& e) {
      const std::lock_guard lock(mu);
      ++(e.kind == SessionEvent::Kind::connected ? connected : other);
      cv.notify_all();
    }
  } ev;
  const auto tcp_to = [](const std::string& address) {
    ConnectionParams p;
    p.transport = Transport::tcp;
    p.peer = SocketAddress::parse(address).value();
    return p;
  };
  const auto options = [](NodeId id) {
    MessengerOptions o;
    o.node_id = id;
    o.probe_backoff_initial = 100ms;
    return o;
  };
  const auto on_message = [&ev](NodeId, std::span<const std::byte>) {
    const std::lock_guard lock(ev.mu);
    ++ev.delivered;
    ev.cv.notify_all();
  };
  const auto on_event = [&ev](SessionEvent e) { ev.on(e); };
  auto hub_loops = LoopThreads::create(2).value();
  auto peer_loops = LoopThreads::create(2).value();
  auto hub = Messenger::create(hub_loops->loops(), options(kHub), on_message, on_event).value();
  const auto any = SocketAddress::from_host_port(host, 0).value();
  const std::string hub_rdma = hub->listen(any, rdma_to(std::string(host) + ":1")).value();
  const std::string hub_tcp = hub->listen(any, tcp_to(std::string(host) + ":1")).value();
  // One peer owned by each of the hub's loops.
  std::vector<NodeId> ids;
  for (NodeId id = 2; ids.size() < 2; ++id) {
    const bool on0 = &hub->loop_of(id) == &hub_loops->loop(0);
    if (on0 == ids.empty()) ids.push_back(id);
  }
  std::vector<std::unique_ptr<Messenger>> peers;
  for (std::size_t i = 0; i < 2; ++i) {
    auto m = Messenger::create(peer_loops->loop(i), options(ids[i]), on_message, on_event).value();
    const std::string r = m->listen(any, rdma_to(std::string(host) + ":1")).value();
    const std::string t = m->listen(any, tcp_to(std::string(host) + ":1")).value();
    ASSERT_TRUE(hub->add_peer(ids[i], PeerAddresses{rdma_to(r), tcp_to(t)}).ok());
    ASSERT_TRUE(m->add_peer(kHub, PeerAddresses{rdma_to(hub_rdma), tcp_to(hub_tcp)}).ok());
    peers.push_back(std::move(m));
  }
  hub_loops->start();
  peer_loops->start();
  // The peers connect in: the hub's sessions live on the connections it accepted.
  for (auto& m : peers) ASSERT_TRUE(m->send(kHub, numbered(1)).ok());
  {
    std::unique_lock lock(ev.mu);
    ASSERT_TRUE(ev.cv.wait_for(lock, 30s, [&] { return ev.delivered == 2 && ev.connected == 4; }))
        << ev.delivered << " delivered, " << ev.connected << " connected";
    // Four probe intervals and more: a session that thinks it is on TCP has probed by then.
    EXPECT_FALSE(ev.cv.wait_for(lock, 1500ms, [&] { return ev.other > 0 || ev.connected > 4; }))
        << ev.other << " other events, " << ev.connected << " connected";
  }
  for (std::size_t i = 0; i < 2; ++i) {
    std::optional<Messenger::SessionInfo> theirs, mine;
    const std::size_t owner = &hub->loop_of(ids[i]) == &hub_loops->loop(0) ? 0 : 1;
    hub_loops->run_sync(owner, [&] { theirs = hub->session_info(ids[i]); });
    peer_loops->run_sync(i, [&] { mine = peers[i]->session_info(kHub); });
    ASSERT_TRUE(theirs && mine);
    EXPECT_EQ(theirs->transport, Transport::rdma) << "hub loop " << owner;
    EXPECT_EQ(mine->transport, Transport::rdma);
    EXPECT_EQ(peers[i]->counter_total("msg.probes"), 0u);
  }
  EXPECT_EQ(hub->counter_total("msg.probes"), 0u);
  EXPECT_EQ(hub->counter_total("msg.switches.to_tcp"), 0u);
  hub.reset();
  peers.clear();
}

}  // namespace
}  // namespace rmsg::testing
