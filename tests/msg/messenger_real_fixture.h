// Two messengers on one real loop over the ConnectionManager's streams (TCP here, RDMA in
// the Soft-RoCE guest), wrapped so that a test can kill the connections under them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "kit/pattern.h"
#include "kit/seed.h"
#include "msg/killable_streams.h"
#include "msg/msg_harness.h"

namespace rmsg::testing {

class MessengerRealTest : public ::testing::Test {
 protected:
  static constexpr NodeId kA = 1;
  static constexpr NodeId kB = 2;

  struct Side {
    Node node;
    KillableStreams* streams = nullptr;  // owned by the messenger
    std::string address;
  };

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
    a_.node.m.reset();
    b_.node.m.reset();
    loop_->run_for([] { return false; }, std::chrono::milliseconds(20));
  }

  virtual MessengerOptions options(NodeId id) const {
    MessengerOptions o;
    o.node_id = id;
    o.handshake_timeout = std::chrono::seconds(5);
    o.backoff_initial = std::chrono::milliseconds(2);
    o.backoff_max = std::chrono::milliseconds(100);
    return o;
  }

  void start(Side& side, NodeId id, std::uint16_t port) {
    side.node.m.reset();
    Node* n = &side.node;
    auto streams = std::make_unique<KillableStreams>(*loop_);
    side.streams = streams.get();
    auto m = MessengerAccess::create(
        *loop_, options(id), std::move(streams),
        [n](NodeId from, std::span<const std::byte> p) { n->ledger.on_message(from, p); },
        [n](SessionEvent e) { n->on_event(std::move(e)); });
    ASSERT_TRUE(m.ok());
    side.node.m = std::move(m).value();
    auto addr = SocketAddress::from_host_port(host(), port).value();
    auto bound = side.node.m->listen(addr, params());
    ASSERT_TRUE(bound.ok()) << bound.error().message();
    side.address = bound.value();
  }
  ConnectionParams peer_params(const Side& side) const {
    ConnectionParams p = params();
    p.peer = SocketAddress::parse(side.address).value();
    return p;
  }
  void start_both(bool both_ways = false) {
    start(a_, kA, 0);
    start(b_, kB, 0);
    ASSERT_TRUE(a_.node.m->add_peer(kB, peer_params(b_)).ok());
    if (both_ways) {
      ASSERT_TRUE(b_.node.m->add_peer(kA, peer_params(a_)).ok());
    }
  }
  bool run(const std::function<bool()>& done, Duration limit = std::chrono::seconds(30)) {
    return loop_->run_for(done, limit);
  }
  // Keeps up to `depth` messages queued from `from` to `to` until `total` were sent.
  static void top_up(Node& from, NodeId to, std::uint64_t total, std::size_t depth,
                     std::mt19937_64& rng, std::size_t max_len) {
    auto info = from.m->session_info(to);
    std::size_t queued = info ? info->queued : 0;
    while (queued < depth && from.next_index[to] < total) {
      if (!from.send_next(to, log_uniform(rng, 8, max_len)).ok()) break;
      ++queued;
    }
  }
  bool all_delivered(const Node& from, NodeId from_id, const Node& to, NodeId to_id,
                     std::uint64_t total) {
    auto it = to.ledger.last.find(from_id);
    auto info = from.m->session_info(to_id);
    return it != to.ledger.last.end() && it->second == total && info && info->queued == 0;
  }

  // Sends `total` messages each way with the connections killed at random points; checks
  // 0 lost, 0 doubled, 0 out of order. Returns the number of kills.
  int soak(std::uint64_t total, std::size_t max_len, int kill_every_min, int kill_every_max,
           Duration limit) {
    const std::uint64_t seed = seed_for("soak");
    std::printf("[ soak     ] seed %llu, %llu messages each way\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(total));
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> gap(kill_every_min, kill_every_max);
    std::uint64_t next_kill = static_cast<std::uint64_t>(gap(rng));
    int kills = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const bool done = run(
        [&] {
          top_up(a_.node, kB, total, 512, rng, max_len);
          top_up(b_.node, kA, total, 512, rng, max_len);
          const std::uint64_t progress = b_.node.ledger.delivered + a_.node.ledger.delivered;
          if (progress >= next_kill) {
            // Either side's streams: the killer's side reads a reset at once, the other
            // when the transport reports the abort.
            kills += (rng() & 1) ? a_.streams->kill_all() : b_.streams->kill_all();
            next_kill = progress + static_cast<std::uint64_t>(gap(rng));
          }
          return all_delivered(a_.node, kA, b_.node, kB, total) &&
                 all_delivered(b_.node, kB, a_.node, kA, total);
        },
        limit);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "[ soak     ] %s in %.2f s: %d kills, delivered %llu + %llu, doubled %llu + %llu, "
        "replayed %llu + %llu, reconnects %llu + %llu\n",
        done ? "done" : "NOT DONE", secs, kills,
        static_cast<unsigned long long>(b_.node.ledger.delivered),
        static_cast<unsigned long long>(a_.node.ledger.delivered),
        static_cast<unsigned long long>(b_.node.ledger.doubled),
        static_cast<unsigned long long>(a_.node.ledger.doubled),
        static_cast<unsigned long long>(a_.node.counter("msg.replayed")),
        static_cast<unsigned long long>(b_.node.counter("msg.replayed")),
        static_cast<unsigned long long>(a_.node.counter("msg.opened")),
        static_cast<unsigned long long>(b_.node.counter("msg.opened")));
    EXPECT_TRUE(done);
    EXPECT_EQ(b_.node.ledger.delivered, total);
    EXPECT_EQ(a_.node.ledger.delivered, total);
    expect_exactly_once(a_.node, kA, b_.node, kB);
    expect_exactly_once(b_.node, kB, a_.node, kA);
    EXPECT_EQ(a_.node.count(SessionEvent::Kind::reset) + b_.node.count(SessionEvent::Kind::reset),
              0);
    return kills;
  }

  std::unique_ptr<EventLoop> loop_;
  Side a_;
  Side b_;
};

}  // namespace rmsg::testing
