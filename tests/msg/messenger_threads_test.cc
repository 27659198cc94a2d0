// Many loops on many threads (TSan's tier runs this file): a messenger over 4 loops on 4
// threads, 8 sender threads that are no loop's, 16 peers over TCP loopback; accepted
// connections routed to the loop that owns their session; and the loopback stream with
// its loop on a thread of its own. Every message once and in order per (sender thread,
// peer); one session per peer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "msg/msg_harness.h"
#include "rmsg/loop_threads.h"
#include "rmsg/messenger.h"
#include "rmsg/rpc.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kSenders = 8;

// Payload: u32 sender thread, u64 its sequence number to this peer, filler.
std::vector<std::byte> tagged(std::uint32_t sender, std::uint64_t seq) {
  std::vector<std::byte> p(48, std::byte{0x5a});
  std::memcpy(p.data(), &sender, 4);
  std::memcpy(p.data() + 4, &seq, 8);
  return p;
}

// One receiver's view of one sending node: per sender thread, the last sequence number.
// Written only on the loop that owns the session (one thread), read after `Done` fired.
struct Inbox {
  std::uint64_t last[kSenders] = {};
  std::uint64_t bad = 0;  // out of order, doubled or malformed
  void take(std::span<const std::byte> p) {
    std::uint32_t s = 0;
    std::uint64_t seq = 0;
    if (p.size() != 48) {
      ++bad;
      return;
    }
    std::memcpy(&s, p.data(), 4);
    std::memcpy(&seq, p.data() + 4, 8);
    if (s >= kSenders || seq != last[s] + 1) {
      ++bad;
      return;
    }
    last[s] = seq;
  }
};

// Counts deliveries from any loop thread; wakes the test thread at the total.
class Done {
 public:
  explicit Done(std::uint64_t total) : total_(total) {}
  void one() {
    if (n_.fetch_add(1, std::memory_order_acq_rel) + 1 == total_) {
      const std::lock_guard lock(mu_);
      done_ = true;
      cv_.notify_all();
    }
  }
  bool wait(Duration limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [this] { return done_; });
  }
  std::uint64_t count() const { return n_.load(); }

 private:
  const std::uint64_t total_;
  std::atomic<std::uint64_t> n_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

// Sends until accepted: a queue bound is an error value, met here by trying again.
void send_all(Messenger& m, NodeId to, std::uint32_t sender, std::uint64_t seq) {
  for (;;) {
    auto r = m.send(to, tagged(sender, seq));
    if (r) return;
    ASSERT_EQ(r.error(), make_error_code(Errc::resource_exhausted)) << r.error().message();
    std::this_thread::yield();
  }
}

TEST(MessengerThreads, FourLoopsEightSendersSixteenPeersOverTcp) {
  constexpr NodeId kHub = 1;
  constexpr int kPeers = 16;
  constexpr std::uint64_t kEach = 40;  // per (sender thread, direction, peer)
  const std::uint64_t total = 2ull * kSenders * kPeers * kEach;
  Done done(total);

  auto hub_loops = LoopThreads::create(4).value();
  auto peer_loops = LoopThreads::create(4).value();
  std::vector<Inbox> at_hub(kPeers + 2);   // by sending peer's node id
  std::vector<Inbox> at_peer(kPeers + 2);  // by receiving peer's node id
  auto hub = Messenger::create(hub_loops->loops(), quick_reconnect_options(kHub),
                               [&](NodeId from, std::span<const std::byte> p) {
                                 at_hub[from].take(p);
                                 done.one();
                               })
                 .value();
  const auto any = SocketAddress::parse("127.0.0.1:0").value();
  const auto hub_addr = hub->listen(any, tcp_params("127.0.0.1:1")).value();
  std::vector<std::unique_ptr<Messenger>> peers;
  for (int i = 0; i < kPeers; ++i) {
    const NodeId id = 2 + static_cast<NodeId>(i);
    auto m = Messenger::create(peer_loops->loop(static_cast<std::size_t>(i) % 4),
                               quick_reconnect_options(id),
                               [&, id](NodeId from, std::span<const std::byte> p) {
                                 if (from == kHub) at_peer[id].take(p);
                                 done.one();
                               })
                 .value();
    const auto addr = m->listen(any, tcp_params("127.0.0.1:1")).value();
    ASSERT_TRUE(m->add_peer(kHub, tcp_params(hub_addr)).ok());
    // Half the peers are reachable by the hub's own connects; the rest only connect to it.
    if (i % 2 == 0) {
      ASSERT_TRUE(hub->add_peer(id, tcp_params(addr)).ok());
    }
    peers.push_back(std::move(m));
  }
  hub_loops->start();
  peer_loops->start();

  std::vector<std::thread> senders;
  for (std::uint32_t s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      for (std::uint64_t seq = 1; seq <= kEach; ++seq) {
        for (int i = 0; i < kPeers; ++i) {
          send_all(*hub, 2 + static_cast<NodeId>(i), s, seq);
          send_all(*peers[static_cast<std::size_t>(i)], kHub, s, seq);
        }
      }
    });
  }
  for (auto& t : senders) t.join();
  ASSERT_TRUE(done.wait(60s)) << done.count() << " of " << total << " delivered";

  for (int i = 0; i < kPeers; ++i) {
    const NodeId id = 2 + static_cast<NodeId>(i);
    EXPECT_EQ(at_hub[id].bad, 0u) << id;
    EXPECT_EQ(at_peer[id].bad, 0u) << id;
    for (int s = 0; s < kSenders; ++s) {
      EXPECT_EQ(at_hub[id].last[s], kEach) << id << " " << s;
      EXPECT_EQ(at_peer[id].last[s], kEach) << id << " " << s;
    }
  }
  // One session per peer, on the loop that owns it: a connection accepted on loop 0 but
  // served elsewhere would have made a second one.
  EXPECT_EQ(hub->counter_total("msg.sessions"), static_cast<std::uint64_t>(kPeers));
  EXPECT_EQ(hub->counter_total("msg.resets"), 0u);
  EXPECT_GE(hub->counter_total("msg.route.routed"), static_cast<std::uint64_t>(kPeers / 2));
  EXPECT_EQ(hub->counter_total("msg.route.malformed") + hub->counter_total("msg.route.timeout"),
            0u);
  std::size_t loops_used = 0;
  for (std::size_t l = 0; l < hub->loop_count(); ++l) {
    loops_used += hub->counters(l).value("msg.sessions") > 0;
  }
  EXPECT_GE(loops_used, 3u);  // 16 peers hashed over 4 loops
  hub.reset();                // while the loops run: each shard shuts down on its own loop
  peers.clear();
}

// The loopback stream (the kit's in-process transport) between two messengers whose loop
// runs on a thread of its own, with the 8 sender threads handing messages over.
TEST(MessengerThreads, SendersOnOtherThreadsOverTheLoopbackStream) {
  constexpr NodeId kA = 1;
  constexpr NodeId kB = 2;
  constexpr std::uint64_t kEach = 500;
  Done done(2ull * kSenders * kEach);
  auto loops = LoopThreads::create(1).value();
  EventLoop& loop = loops->loop(0);
  Inbox at_a;
  Inbox at_b;
  auto faults = std::make_shared<LoopbackFaults>();
  auto make = [&](NodeId id, Inbox& inbox) {
    return MessengerAccess::create(loop, quick_reconnect_options(id),
                                   std::make_unique<LoopbackStreams>(loop, faults, faults),
                                   [&](NodeId, std::span<const std::byte> p) {
                                     inbox.take(p);
                                     done.one();
                                   },
                                   {})
        .value();
  };
  auto a = make(kA, at_a);
  auto b = make(kB, at_b);
  ASSERT_TRUE(b->listen(loopback_params(7102).peer, loopback_params(7102)).ok());
  ASSERT_TRUE(a->add_peer(kB, loopback_params(7102)).ok());
  loops->start();
  std::vector<std::thread> senders;
  for (std::uint32_t s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      for (std::uint64_t seq = 1; seq <= kEach; ++seq) {
        send_all(*a, kB, s, seq);
        send_all(*b, kA, s, seq);
      }
    });
  }
  for (auto& t : senders) t.join();
  ASSERT_TRUE(done.wait(60s)) << done.count();
  EXPECT_EQ(at_a.bad + at_b.bad, 0u);
  for (int s = 0; s < kSenders; ++s) {
    EXPECT_EQ(at_a.last[s], kEach);
    EXPECT_EQ(at_b.last[s], kEach);
  }
  std::uint64_t sessions = 0;
  loops->run_sync(0, [&] { sessions = a->counters().value("msg.sessions"); });
  EXPECT_EQ(sessions, 1u);
  a.reset();
  b.reset();
}

}  // namespace
}  // namespace rmsg::testing

namespace rmsg::testing {
namespace {

// RPC calls and one-way messages from 4 threads that are no loop's, to a server endpoint
// on another loop thread, over TCP: every call completes ok with its own body.
TEST(MessengerThreads, RpcCallsFromForeignThreads) {
  constexpr int kCallers = 4;
  constexpr int kEach = 150;
  auto loops = LoopThreads::create(2).value();
  RpcOptions co;
  co.messenger = quick_reconnect_options(1);
  RpcOptions so;
  so.messenger = quick_reconnect_options(2);
  auto client = RpcEndpoint::create(loops->loop(0), co).value();
  auto server = RpcEndpoint::create(loops->loop(1), so).value();
  Done oneways(static_cast<std::uint64_t>(kCallers) * kEach);
  server->handle(1, [](const RpcRequest& req, RpcResponder reply) { reply.ok(req.body); });
  server->handle_oneway(2, [&](const RpcRequest&) { oneways.one(); });
  const auto addr =
      server->messenger()
          .listen(SocketAddress::parse("127.0.0.1:0").value(), tcp_params("127.0.0.1:1"))
          .value();
  ASSERT_TRUE(client->messenger().add_peer(2, tcp_params(addr)).ok());
  loops->start();

  Done done(static_cast<std::uint64_t>(kCallers) * kEach);
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto body = tagged(static_cast<std::uint32_t>(t), static_cast<std::uint64_t>(i));
        auto id = client->call(2, 1, body, {.deadline = loops->loop(0).now() + 30s},
                               [&, body](RpcResponse r) {
                                 if (r.error || r.body != body) ++wrong;
                                 done.one();
                               });
        ASSERT_TRUE(id.ok()) << id.error().message();
        ASSERT_TRUE(client->notify(2, 2, body).ok());
      }
    });
  }
  for (auto& c : callers) c.join();
  ASSERT_TRUE(done.wait(60s)) << done.count();
  EXPECT_EQ(wrong.load(), 0);
  ASSERT_TRUE(oneways.wait(60s)) << oneways.count();
  std::optional<RpcPeerStats> stats;
  loops->run_sync(0, [&] { stats = client->peer_stats(2); });
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->ok, static_cast<std::uint64_t>(kCallers) * kEach);
  EXPECT_EQ(stats->outstanding, 0u);
  loops->run_sync(0, [&] { client.reset(); });
  loops->run_sync(1, [&] { server.reset(); });
}

}  // namespace
}  // namespace rmsg::testing

namespace rmsg::testing {
namespace {

// The queue bounds answer a send from another thread at once: the per-peer and the
// messenger-wide budget are reserved before the message is handed to its loop.
TEST(MessengerThreads, AFullQueueIsRefusedAtOnceFromAnotherThread) {
  auto loops = LoopThreads::create(2).value();
  MessengerOptions o = quick_reconnect_options(1);
  o.session_max_messages = 10;
  o.total_max_messages = 15;
  auto m = Messenger::create(loops->loops(), o, [](NodeId, std::span<const std::byte>) {}).value();
  loops->start();  // no peer has an address: every message stays queued
  const auto p = numbered(1);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(m->send(5, p).ok()) << i;
  EXPECT_EQ(m->send(5, p).error(), make_error_code(Errc::resource_exhausted));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(m->send(6, p).ok()) << i;
  EXPECT_EQ(m->send(6, p).error(), make_error_code(Errc::resource_exhausted));  // the total
  EXPECT_EQ(m->counter_total("msg.send_refused"), 2u);
  std::size_t owner5 = 0;
  while (&loops->loop(owner5) != &m->loop_of(5)) ++owner5;
  std::optional<Messenger::SessionInfo> info;
  loops->run_sync(owner5, [&] { info = m->session_info(5); });
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->queued, 10u);
  // Dropping the session gives its share back (mark_down is posted; run_sync follows it).
  m->mark_down(5);
  loops->run_sync(owner5, [] {});
  EXPECT_TRUE(m->send(6, p).ok());
  EXPECT_TRUE(m->send(5, p).ok());
  m.reset();
}

// A send refused on a foreign thread starts a refusal episode like one on the loop: once
// the peer acknowledged, one SessionEvent::writable runs on the loop that owns the peer.
TEST(MessengerThreads, ARefusalOnAnotherThreadEndsWithWritableOnTheOwnersLoop) {
  auto loops = LoopThreads::create(2).value();
  auto peer_loop = LoopThreads::create(1).value();
  std::atomic<int> delivered{0};
  auto b = Messenger::create(peer_loop->loop(0), quick_reconnect_options(5),
                             [&](NodeId, std::span<const std::byte>) { ++delivered; })
               .value();
  const auto any = SocketAddress::parse("127.0.0.1:0").value();
  const auto b_addr = b->listen(any, tcp_params("127.0.0.1:1")).value();
  MessengerOptions o = quick_reconnect_options(1);
  o.session_max_messages = 8;
  Done writable(1);
  std::atomic<bool> wrong_thread{false};
  Messenger* a_ptr = nullptr;
  auto a = Messenger::create(
               loops->loops(), o, [](NodeId, std::span<const std::byte>) {},
               [&](SessionEvent e) {
                 if (e.kind != SessionEvent::Kind::writable || e.peer != 5) return;
                 if (!a_ptr->loop_of(5).in_loop_thread()) wrong_thread = true;
                 writable.one();
               })
               .value();
  a_ptr = a.get();
  loops->start();
  peer_loop->start();
  const auto p = numbered(1);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(a->send(5, p).ok()) << i;  // no address yet
  EXPECT_EQ(a->send(5, p).error(), make_error_code(Errc::resource_exhausted));
  ASSERT_TRUE(a->add_peer(5, tcp_params(b_addr)).ok());
  EXPECT_TRUE(writable.wait(10s));
  EXPECT_FALSE(wrong_thread.load());
  EXPECT_EQ(writable.count(), 1u);
  a.reset();
  b.reset();
}

// A send refused on a foreign thread because of the messenger-wide budget, for a peer that
// has no session anywhere yet, ends with SessionEvent::writable too (on that peer's loop),
// whether the acks that make room come on its loop or on another one.
TEST(MessengerThreads, ARefusalForAPeerWithNoSessionEndsWithWritable) {
  auto loops = LoopThreads::create(2).value();
  auto peer_loop = LoopThreads::create(1).value();
  auto b = Messenger::create(peer_loop->loop(0), quick_reconnect_options(5),
                             [](NodeId, std::span<const std::byte>) {})
               .value();
  const auto any = SocketAddress::parse("127.0.0.1:0").value();
  const auto b_addr = b->listen(any, tcp_params("127.0.0.1:1")).value();
  MessengerOptions o = quick_reconnect_options(1);
  o.total_max_messages = 8;
  std::mutex mu;
  std::map<NodeId, int> writable;
  std::atomic<bool> wrong_thread{false};
  Done two(2);
  Messenger* a_ptr = nullptr;
  auto a = Messenger::create(
               loops->loops(), o, [](NodeId, std::span<const std::byte>) {},
               [&](SessionEvent e) {
                 if (e.kind != SessionEvent::Kind::writable) return;
                 if (!a_ptr->loop_of(e.peer).in_loop_thread()) wrong_thread = true;
                 {
                   const std::lock_guard lock(mu);
                   ++writable[e.peer];
                 }
                 two.one();
               })
               .value();
  a_ptr = a.get();
  NodeId same = 0;   // on 5's loop: 5's acks make the room there
  NodeId other = 0;  // on the other loop: it hears of the room through a posted sweep
  for (NodeId id = 6; same == 0 || other == 0; ++id) {
    NodeId& slot = &a->loop_of(id) == &a->loop_of(5) ? same : other;
    if (slot == 0) slot = id;
  }
  loops->start();
  peer_loop->start();
  const auto p = numbered(1);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(a->send(5, p).ok()) << i;  // no address yet
  EXPECT_EQ(a->send(same, p).error(), make_error_code(Errc::resource_exhausted));
  EXPECT_EQ(a->send(other, p).error(), make_error_code(Errc::resource_exhausted));
  EXPECT_EQ(a->send(other, p).error(), make_error_code(Errc::resource_exhausted));  // same episode
  ASSERT_TRUE(a->add_peer(5, tcp_params(b_addr)).ok());
  EXPECT_TRUE(two.wait(10s));
  for (std::size_t i = 0; i < loops->size(); ++i) loops->run_sync(i, [] {});  // events queued
  EXPECT_FALSE(wrong_thread.load());
  {
    const std::lock_guard lock(mu);
    EXPECT_EQ(writable[same], 1);
    EXPECT_EQ(writable[other], 1);
    EXPECT_EQ(writable[5], 0);  // never refused
  }
  EXPECT_TRUE(a->send(same, p).ok());
  EXPECT_TRUE(a->send(other, p).ok());
  a.reset();
  b.reset();
}

// What a hub over several loops and its peers saw, shared by the loop threads and the test
// thread, which waits on `cv` for a condition over it.
struct Census {
  std::mutex mu;
  std::condition_variable cv;
  std::set<NodeId> open;          // the hub: sessions connected now
  std::set<NodeId> ever;          // the hub: sessions ever connected
  std::size_t most_open = 0;      // the hub: the most at once
  std::map<NodeId, int> refused;  // a peer: its attempts that failed
  void hub(const SessionEvent& e) {
    const std::lock_guard lock(mu);
    if (e.kind == SessionEvent::Kind::connected) {
      open.insert(e.peer);
      ever.insert(e.peer);
      most_open = std::max(most_open, open.size());
    } else if (e.kind == SessionEvent::Kind::disconnected) {
      open.erase(e.peer);
    }
    cv.notify_all();
  }
  void peer(NodeId self, const SessionEvent& e) {
    if (e.kind != SessionEvent::Kind::failed) return;
    const std::lock_guard lock(mu);
    ++refused[self];
    cv.notify_all();
  }
  bool wait(const std::function<bool()>& done, Duration limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, done);
  }
};

// MessengerOptions::max_connections bounds the TCP connections a messenger over several
// loops accepts, wherever the router moved them: with 3 allowed, 3 of 6 peers get in and
// the others are reset at accept (they retry after backoff); once those 3 went, the others
// get in.
TEST(MessengerThreads, MaxConnectionsBoundsAcceptedConnectionsOnEveryLoop) {
  auto loops = LoopThreads::create(3).value();
  auto peer_loop = LoopThreads::create(1).value();
  Census census;
  MessengerOptions o = quick_reconnect_options(1);
  o.max_connections = 3;
  auto hub = Messenger::create(
                 loops->loops(), o, [](NodeId, std::span<const std::byte>) {},
                 [&census](SessionEvent e) { census.hub(e); })
                 .value();
  const auto any = SocketAddress::parse("127.0.0.1:0").value();
  const auto addr = hub->listen(any, tcp_params("127.0.0.1:1")).value();
  std::set<EventLoop*> owners;
  std::map<NodeId, std::unique_ptr<Messenger>> peers;
  for (NodeId id = 2; id < 8; ++id) {
    owners.insert(&hub->loop_of(id));
    peers[id] = Messenger::create(
                    peer_loop->loop(0), quick_reconnect_options(id),
                    [](NodeId, std::span<const std::byte>) {},
                    [&census, id](SessionEvent e) { census.peer(id, e); })
                    .value();
  }
  ASSERT_GE(owners.size(), 2u);  // connections routed away from loop 0
  loops->start();
  peer_loop->start();
  for (auto& [id, m] : peers) {
    ASSERT_TRUE(m->add_peer(1, tcp_params(addr)).ok());
    ASSERT_TRUE(m->send(1, numbered(1)).ok());
  }
  // 3 in; each of the others refused twice at least (it retried and was refused again).
  ASSERT_TRUE(census.wait(
      [&] {
        if (census.open.size() != 3) return false;
        for (NodeId id = 2; id < 8; ++id) {
          if (!census.ever.contains(id) && census.refused[id] < 2) return false;
        }
        return true;
      },
      10s));
  std::set<NodeId> first;
  {
    const std::lock_guard lock(census.mu);
    first = census.ever;
  }
  ASSERT_EQ(first.size(), 3u);
  for (NodeId id : first) peers.erase(id);  // their connections close: the count returns
  ASSERT_TRUE(census.wait([&] { return census.ever.size() == 6 && census.open.size() == 3; }, 10s));
  const std::lock_guard lock(census.mu);
  EXPECT_EQ(census.most_open, 3u);
}

// Messenger::shutdown over several loops: every shard drains its sessions (here peers on
// both loops), sends from any thread are refused from the call on, done runs once.
TEST(MessengerThreads, GracefulShutdownDrainsEveryLoop) {
  auto loops = LoopThreads::create(2).value();
  auto peer_loop = LoopThreads::create(1).value();
  std::atomic<int> delivered{0};
  std::vector<std::unique_ptr<Messenger>> peers;
  std::vector<std::string> addrs;
  const auto any = SocketAddress::parse("127.0.0.1:0").value();
  for (NodeId id = 2; id < 10; ++id) {
    peers.push_back(Messenger::create(peer_loop->loop(0), quick_reconnect_options(id),
                                      [&](NodeId, std::span<const std::byte>) { ++delivered; })
                        .value());
    addrs.push_back(peers.back()->listen(any, tcp_params("127.0.0.1:1")).value());
  }
  auto a = Messenger::create(loops->loops(), quick_reconnect_options(1),
                             [](NodeId, std::span<const std::byte>) {})
               .value();
  std::set<EventLoop*> owners;
  for (NodeId id = 2; id < 10; ++id) {
    ASSERT_TRUE(a->add_peer(id, tcp_params(addrs[id - 2])).ok());
    owners.insert(&a->loop_of(id));
  }
  ASSERT_EQ(owners.size(), 2u);  // the drain has something to wait for on both loops
  loops->start();
  peer_loop->start();
  for (NodeId id = 2; id < 10; ++id) {
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(a->send(id, numbered(1)).ok());
  }
  Done done(1);
  a->shutdown(Clock::now() + 10s, [&] { done.one(); });
  EXPECT_EQ(a->send(2, numbered(1)).error(), make_error_code(Errc::closed));
  ASSERT_TRUE(done.wait(10s));
  EXPECT_EQ(delivered.load(), 8 * 20);  // drained, not dropped
  EXPECT_EQ(done.count(), 1u);
  a.reset();
  peers.clear();
}

}  // namespace
}  // namespace rmsg::testing

namespace rmsg::testing {
namespace {

// Sessions expire (and their per-peer budgets are forgotten) on their loops while other
// threads keep sending to the same peers: every message a send() accepted comes back in a
// reset (session_expired) event, none is lost or counted twice, and once the senders
// stopped every session is gone.
TEST(MessengerThreads, SessionsExpireWhileOtherThreadsSendToThem) {
  auto loops = LoopThreads::create(2).value();
  MessengerOptions o = quick_reconnect_options(1);
  o.session_expiry = 20ms;  // no addresses: every session waits for its peer, then expires
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t handed_back = 0;
  std::uint64_t expired = 0;
  auto hub = Messenger::create(
                 loops->loops(), o, [](NodeId, std::span<const std::byte>) {},
                 [&](SessionEvent e) {
                   if (e.kind != SessionEvent::Kind::reset) return;
                   EXPECT_EQ(e.error, make_error_code(MessengerErrc::session_expired));
                   const std::lock_guard lock(mu);
                   ++expired;
                   handed_back += e.unknown.size() + e.unsent.size();
                   cv.notify_all();
                 })
                 .value();
  loops->start();
  std::atomic<std::uint64_t> accepted{0};
  std::vector<std::thread> senders;
  for (std::uint32_t t = 0; t < 4; ++t) {
    senders.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < 3000; ++i) {
        if (hub->send(100 + (i % 16), tagged(t, i)).ok()) accepted.fetch_add(1);
        if (i % 256 == 0) std::this_thread::sleep_for(5ms);  // pacing: some expire meanwhile
      }
    });
  }
  for (auto& s : senders) s.join();
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 10s, [&] { return handed_back >= accepted.load(); }));
    EXPECT_EQ(handed_back, accepted.load());
    EXPECT_GT(expired, 16u);  // sessions came back after expiring
  }
  EXPECT_GT(accepted.load(), 0u);
  EXPECT_EQ(hub->counter_total("msg.sessions_live"), 0u);
  hub.reset();
}

}  // namespace
}  // namespace rmsg::testing
