// RPC over a messenger of several loops (TSan's tier runs this file, in msg_threads_tests):
// a hub messenger over 4 loops on 4 threads with an RpcEndpoint as one of its services,
// 16 peers over TCP loopback on 4 more loops. Calls from 8 threads that are no loop's and
// from the hub's loops; `done` and handlers on the loop that owns the peer; responders
// answered from another thread; cancel and retry_of from other threads; a graceful
// shutdown drained over the shards; the destructor from a foreign thread.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rpc/rpc_threads_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
using namespace rpc_threads;

TEST(RpcThreads, FourLoopsSixteenPeersCallsFromEveryThread) {
  constexpr int kPeers = 16;
  constexpr int kEach = 12;     // per (foreign thread, peer), each direction
  constexpr int kLoopEach = 6;  // per (hub loop, peer)
  Cluster c(kPeers);
  Worker worker;
  std::atomic<int> wrong_thread{0};
  c.ep->handle(kHubEcho, [&](const RpcRequest& req, RpcResponder reply) {
    if (!c.hub->loop_of(req.from).in_loop_thread()) ++wrong_thread;
    worker.take(std::move(reply), std::vector<std::byte>(req.body.begin(), req.body.end()));
  });
  c.start();

  const std::uint64_t to_peers =
      std::uint64_t{kThreads} * kPeers * kEach + std::uint64_t{kLoops} * kPeers * kLoopEach;
  const std::uint64_t to_hub = std::uint64_t{kThreads} * kPeers * kEach;
  Latch done(to_peers + to_hub);
  Latch notes(std::uint64_t{kThreads} * kPeers * kEach);  // one-way, hub -> peers
  c.notes = &notes;
  Ledger out(kThreads + kLoops, kPeers, kEach);  // hub -> peers (loop senders use kLoopEach)
  Ledger in(kThreads, kPeers, kEach);            // peers -> hub
  std::atomic<int> wrong{0};
  std::atomic<int> bad_id{0};
  std::atomic<int> refused{0};
  auto call_peer = [&](int sender, int p, int seq) {
    const NodeId to = Cluster::peer(p);
    const std::string t = tag(sender, p, seq);
    auto id = c.ep->call(to, kEcho, bytes_of(t), {.deadline = Clock::now() + 60s},
                         [&, to, t, slot = out.slot(sender, p, seq)](RpcResponse r) {
                           if (r.error || string_of(r.body) != t) ++wrong;
                           if (!c.hub->loop_of(to).in_loop_thread()) ++wrong_thread;
                           ++out.hits[slot];
                           done.one();
                         });
    if (!id) {
      ++refused;
      return;
    }
    // The id names its shard: the loop that owns the peer.
    if ((*id - 1) % kLoops != c.owner(to)) ++bad_id;
  };
  std::vector<std::thread> threads;
  for (int s = 0; s < kThreads; ++s) {
    threads.emplace_back([&, s] {
      for (int seq = 0; seq < kEach; ++seq) {
        for (int p = 0; p < kPeers; ++p) {
          call_peer(s, p, seq);
          if (!c.ep->notify(Cluster::peer(p), kNote, bytes_of("n")).ok()) ++refused;
          const std::string t = tag(s, p, seq);
          auto id = c.peer_ep[static_cast<std::size_t>(p)]->call(
              kHub, kHubEcho, bytes_of(t), {.deadline = Clock::now() + 60s},
              [&, t, slot = in.slot(s, p, seq)](RpcResponse r) {
                if (r.error || string_of(r.body) != t) ++wrong;
                ++in.hits[slot];
                done.one();
              });
          if (!id) ++refused;
        }
      }
    });
  }
  // And from each of the hub's loops: to its own peers at once, to the others handed over.
  for (int l = 0; l < kLoops; ++l) {
    c.hub_loops->loop(static_cast<std::size_t>(l)).post([&, l] {
      for (int seq = 0; seq < kLoopEach; ++seq) {
        for (int p = 0; p < kPeers; ++p) call_peer(kThreads + l, p, seq);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(done.wait(60s)) << done.count() << " of " << to_peers + to_hub;
  ASSERT_TRUE(notes.wait(60s)) << notes.count();
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(wrong_thread.load(), 0);
  EXPECT_EQ(bad_id.load(), 0);
  for (int s = 0; s < kThreads + kLoops; ++s) {
    for (int p = 0; p < kPeers; ++p) {
      for (int seq = 0; seq < (s < kThreads ? kEach : kLoopEach); ++seq) {
        EXPECT_EQ(out.hits[out.slot(s, p, seq)].load(), 1) << tag(s, p, seq);
        if (s < kThreads) {
          EXPECT_EQ(in.hits[in.slot(s, p, seq)].load(), 1) << tag(s, p, seq);
        }
      }
    }
  }
  // One counter set for the endpoint; each peer's stats from its own loop.
  std::uint64_t ok = 0;
  std::uint64_t served = 0;
  std::set<std::size_t> shards;
  for (int p = 0; p < kPeers; ++p) {
    const NodeId id = Cluster::peer(p);
    const std::string pre = "rpc.peer." + std::to_string(id) + ".";
    ok += c.ep->counters().value(pre + "ok");
    served += c.ep->counters().value(pre + "served");
    std::optional<RpcPeerStats> st;
    c.hub_loops->run_sync(c.owner(id), [&] { st = c.ep->peer_stats(id); });
    ASSERT_TRUE(st.has_value());
    EXPECT_EQ(st->ok, std::uint64_t{kThreads} * kEach + std::uint64_t{kLoops} * kLoopEach);
    EXPECT_EQ(st->outstanding, 0u);
    EXPECT_EQ(st->oneway_sent, std::uint64_t{kThreads} * kEach);  // counted on its loop
    EXPECT_EQ(st->latency->count(), st->ok);
    EXPECT_EQ(c.ep->counters().find_histogram(pre + "call_ns"), st->latency);
    shards.insert(c.owner(id));
  }
  EXPECT_EQ(ok, to_peers);
  EXPECT_EQ(served, to_hub);
  EXPECT_GE(shards.size(), 3u);  // 16 peers hashed over 4 loops
  EXPECT_EQ(c.hub->counter_total("msg.sessions"), static_cast<std::uint64_t>(kPeers));
  EXPECT_EQ(c.hub->counter_total("msg.resets"), 0u);
  EXPECT_GE(c.connected.load(), kPeers);  // the endpoint saw each session connect
  EXPECT_EQ(c.event_wrong_thread.load(), 0);
}

// cancel() and retry_of from threads that are no loop's, over the shards.
TEST(RpcThreads, CancelAndRetryFromOtherThreads) {
  constexpr int kPeers = 16;
  Cluster c(kPeers);
  Latch held(kPeers);
  c.held = &held;
  c.start();

  // Held calls on every peer, cancelled from another thread than the caller's.
  Latch cancelled(kPeers);
  std::atomic<int> wrong{0};
  std::vector<CallId> ids(kPeers);
  std::thread caller([&] {
    for (int p = 0; p < kPeers; ++p) {
      const NodeId to = Cluster::peer(p);
      auto id = c.ep->call(to, kHold, bytes_of("hold"), {.deadline = Clock::now() + 60s},
                           [&, to](RpcResponse r) {
                             if (r.error != make_error_code(RpcErrc::cancelled)) ++wrong;
                             if (!c.hub->loop_of(to).in_loop_thread()) ++wrong;
                             cancelled.one();
                           });
      ASSERT_TRUE(id.ok());
      ids[static_cast<std::size_t>(p)] = *id;
    }
  });
  caller.join();
  ASSERT_TRUE(held.wait(30s)) << held.count();  // every request reached its handler
  std::thread canceller([&] {
    for (int p = 0; p < kPeers; ++p) {
      EXPECT_TRUE(c.ep->cancel(ids[static_cast<std::size_t>(p)]));
      // A quick call after it: the cancel (same lane, queued first) reached the peer
      // before this call's reply comes back.
      Latch quick(1);
      ASSERT_TRUE(c.ep->call(Cluster::peer(p), kQuick, bytes_of("q"),
                             {.deadline = Clock::now() + 30s}, [&](RpcResponse) { quick.one(); })
                      .ok());
      ASSERT_TRUE(quick.wait(30s));
    }
  });
  canceller.join();
  ASSERT_TRUE(cancelled.wait(30s)) << cancelled.count();
  EXPECT_EQ(wrong.load(), 0);
  // The calls are gone: cancel() says so on their loop and from any other thread too.
  c.hub_loops->run_sync(c.owner(Cluster::peer(0)), [&] { EXPECT_FALSE(c.ep->cancel(ids[0])); });
  for (CallId id : ids) EXPECT_FALSE(c.ep->cancel(id));
  EXPECT_FALSE(c.ep->cancel(ids[0] + 4096));
  EXPECT_FALSE(c.ep->cancel(0));
  for (int p = 0; p < kPeers; ++p) {
    auto& st = c.state[static_cast<std::size_t>(p)];
    const std::lock_guard lock(st.mu);
    ASSERT_EQ(st.held.size(), 1u);
    EXPECT_TRUE(st.held[0].cancelled()) << p;  // read on this thread
    st.held[0].ok(bytes_of("late"));           // answered from here: posted, then dropped
  }
  for (int p = 0; p < kPeers; ++p) {
    std::uint64_t dropped = 0;
    c.peer_loops->run_sync(static_cast<std::size_t>(p) % kLoops, [&] {
      dropped =
          c.peer_ep[static_cast<std::size_t>(p)]->counters().value("rpc.server.reply_dropped");
    });
    EXPECT_EQ(dropped, 1u) << p;
  }

  // A finished call retried from another thread: answered from the peer's dedupe table.
  for (int p : {0, 5, 11}) {
    const NodeId to = Cluster::peer(p);
    Latch first(1);
    CallId id = 0;
    std::string body1;
    std::thread([&] {
      id = c.ep->call(to, kOnce, bytes_of("x"), {.deadline = Clock::now() + 30s},
                      [&](RpcResponse r) {
                        body1 = string_of(r.body);
                        first.one();
                      })
               .value();
    }).join();
    ASSERT_TRUE(first.wait(30s));
    Latch second(1);
    std::string body2;
    std::error_code err2;
    std::thread([&] {
      auto retry = c.ep->call(to, kOnce, bytes_of("x"),
                              {.deadline = Clock::now() + 30s, .retry_of = id}, [&](RpcResponse r) {
                                err2 = r.error;
                                body2 = string_of(r.body);
                                second.one();
                              });
      ASSERT_TRUE(retry.ok());
      EXPECT_EQ(*retry, id);
    }).join();
    ASSERT_TRUE(second.wait(30s));
    EXPECT_FALSE(err2) << err2.message();
    EXPECT_EQ(body1, "run 1");
    EXPECT_EQ(body2, "run 1");
    EXPECT_EQ(c.state[static_cast<std::size_t>(p)].runs.load(), 1);
  }

  // A retry of a call still outstanding, from another thread: refused through `done`.
  Latch held2(1);
  c.held = &held2;
  const NodeId to = Cluster::peer(3);
  Latch outstanding(1);
  const CallId hold_id = c.ep->call(to, kHold, bytes_of("h"), {.deadline = Clock::now() + 60s},
                                    [&](RpcResponse) { outstanding.one(); })
                             .value();
  ASSERT_TRUE(held2.wait(30s));
  Latch refused(1);
  std::error_code why;
  std::thread([&] {
    auto retry =
        c.ep->call(to, kQuick, bytes_of("r"), {.deadline = Clock::now() + 30s, .retry_of = hold_id},
                   [&](RpcResponse r) {
                     why = r.error;
                     refused.one();
                   });
    EXPECT_TRUE(retry.ok());
  }).join();
  ASSERT_TRUE(refused.wait(30s));
  EXPECT_EQ(why, make_error_code(Errc::invalid_argument));
  // A retry naming a call of another loop's peer is refused at once.
  int q = 0;
  while (c.owner(Cluster::peer(q)) == c.owner(to)) ++q;
  EXPECT_EQ(c.ep->call(Cluster::peer(q), kQuick, bytes_of("r"),
                       {.deadline = Clock::now() + 30s, .retry_of = hold_id}, [](RpcResponse) {})
                .error(),
            make_error_code(Errc::invalid_argument));
  EXPECT_TRUE(c.ep->cancel(hold_id));
  ASSERT_TRUE(outstanding.wait(30s));
}

// shutdown(deadline, done) from a foreign thread drains every shard: calls outstanding on
// all four loops complete ok, a pending responder of the hub is waited for, done runs
// once, after them.
TEST(RpcThreads, GracefulShutdownDrainsEveryShard) {
  constexpr int kPeers = 16;
  Cluster c(kPeers);
  std::mutex mu;
  std::vector<RpcResponder> pending;  // the hub's, answered by this thread
  Latch asked(1);
  c.ep->handle(kHubEcho, [&](const RpcRequest&, RpcResponder reply) {
    const std::lock_guard lock(mu);
    pending.push_back(std::move(reply));
    asked.one();
  });
  c.start();
  Latch answered(1);
  ASSERT_TRUE(c.peer_ep[0]
                  ->call(kHub, kHubEcho, bytes_of("p"), {.deadline = Clock::now() + 30s},
                         [&](RpcResponse r) {
                           EXPECT_FALSE(r.error) << r.error.message();
                           answered.one();
                         })
                  .ok());
  ASSERT_TRUE(asked.wait(30s));

  Latch calls(kPeers);
  std::atomic<int> wrong{0};
  std::set<std::size_t> shards;
  for (int p = 0; p < kPeers; ++p) {
    ASSERT_TRUE(c.ep->call(Cluster::peer(p), kSlow, bytes_of("s"), {.deadline = Clock::now() + 30s},
                           [&](RpcResponse r) {
                             if (r.error || string_of(r.body) != "s") ++wrong;
                             calls.one();
                           })
                    .ok());
    shards.insert(c.owner(Cluster::peer(p)));
  }
  ASSERT_GE(shards.size(), 3u);
  Latch drained(1);
  std::atomic<std::uint64_t> calls_at_done{0};
  c.ep->shutdown(Clock::now() + 20s, [&] {
    calls_at_done = calls.count();
    drained.one();
  });
  EXPECT_EQ(c.ep->call(Cluster::peer(1), kQuick, bytes_of("x"), {.deadline = Clock::now() + 5s},
                       [](RpcResponse) {})
                .error(),
            make_error_code(RpcErrc::shutting_down));
  ASSERT_TRUE(calls.wait(30s)) << calls.count();
  EXPECT_EQ(wrong.load(), 0);  // drained, not failed
  // Still waiting for the pending responder (the deadline is far).
  EXPECT_EQ(drained.count(), 0u);
  {
    const std::lock_guard lock(mu);
    pending.at(0).ok(bytes_of("p"));  // from this thread
  }
  ASSERT_TRUE(drained.wait(30s));
  ASSERT_TRUE(answered.wait(30s));
  EXPECT_EQ(calls_at_done.load(), static_cast<std::uint64_t>(kPeers));
  EXPECT_EQ(drained.count(), 1u);
}

// The destructor on a thread that is no loop's, with calls outstanding on every shard:
// each completes (shutting_down, on its loop) before it returns.
TEST(RpcThreads, DestroyedFromAnotherThreadCompletesEveryCall) {
  constexpr int kPeers = 16;
  Cluster c(kPeers);
  Latch held(kPeers);
  c.held = &held;
  c.start();
  Latch done(kPeers);
  std::atomic<int> wrong{0};
  for (int p = 0; p < kPeers; ++p) {
    const NodeId to = Cluster::peer(p);
    ASSERT_TRUE(c.ep->call(to, kHold, bytes_of("h"), {.deadline = Clock::now() + 60s},
                           [&, to](RpcResponse r) {
                             if (r.error != make_error_code(RpcErrc::shutting_down)) ++wrong;
                             if (!c.hub->loop_of(to).in_loop_thread()) ++wrong;
                             done.one();
                           })
                    .ok());
  }
  ASSERT_TRUE(held.wait(30s));
  c.ep.reset();
  EXPECT_EQ(done.count(), static_cast<std::uint64_t>(kPeers));
  EXPECT_EQ(wrong.load(), 0);
}

// max_outstanding bounds the endpoint, not each loop: calls held on several shards use
// it up, and a call refused on any thread fits again once one of them completed.
TEST(RpcThreads, MaxOutstandingCountsEveryShard) {
  constexpr int kPeers = 16;
  constexpr int kMax = 6;
  Cluster c(kPeers, kMax);
  Latch held(kMax);
  c.held = &held;
  c.start();
  Latch cancelled(1);
  std::vector<CallId> ids;
  std::set<std::size_t> shards;
  std::thread([&] {
    for (int p = 0; p < kMax; ++p) {
      auto id = c.ep->call(Cluster::peer(p), kHold, bytes_of("h"), {.deadline = Clock::now() + 60s},
                           [&](RpcResponse r) {
                             if (r.error == make_error_code(RpcErrc::cancelled)) cancelled.one();
                           });
      ASSERT_TRUE(id.ok());
      ids.push_back(*id);
      shards.insert(c.owner(Cluster::peer(p)));
    }
  }).join();
  ASSERT_GE(shards.size(), 2u);
  ASSERT_TRUE(held.wait(30s));
  const NodeId other = Cluster::peer(kMax);
  auto nothing = [](RpcResponse) {};
  EXPECT_EQ(
      c.ep->call(other, kQuick, bytes_of("x"), {.deadline = Clock::now() + 30s}, nothing).error(),
      make_error_code(Errc::resource_exhausted));
  c.hub_loops->run_sync(c.owner(other), [&] {
    EXPECT_EQ(
        c.ep->call(other, kQuick, bytes_of("x"), {.deadline = Clock::now() + 30s}, nothing).error(),
        make_error_code(Errc::resource_exhausted));
  });
  EXPECT_TRUE(c.ep->cancel(ids[0]));
  ASSERT_TRUE(cancelled.wait(30s));
  Latch quick(1);
  EXPECT_TRUE(c.ep->call(other, kQuick, bytes_of("x"), {.deadline = Clock::now() + 30s},
                         [&](RpcResponse r) {
                           EXPECT_FALSE(r.error) << r.error.message();
                           quick.one();
                         })
                  .ok());
  ASSERT_TRUE(quick.wait(30s));
}

// An endpoint that owns its messenger over several loops.
TEST(RpcThreads, AnOwnedMessengerOverTwoLoops) {
  auto loops = LoopThreads::create(2).value();
  auto server_loop = LoopThreads::create(1).value();
  RpcOptions so;
  so.messenger = opts(2);
  auto server = RpcEndpoint::create(server_loop->loop(0), so).value();
  server->handle(kQuick, [](const RpcRequest& req, RpcResponder reply) { reply.ok(req.body); });
  const auto addr = server->messenger()
                        .listen(SocketAddress::parse("127.0.0.1:0").value(), tcp_to("127.0.0.1:1"))
                        .value();
  RpcOptions co;
  co.messenger = opts(1);
  auto client = RpcEndpoint::create(loops->loops(), co).value();
  EXPECT_EQ(client->messenger().loop_count(), 2u);
  ASSERT_TRUE(client->messenger().add_peer(2, tcp_to(addr)).ok());
  loops->start();
  server_loop->start();
  constexpr int kCalls = 200;
  Latch done(kCalls);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls / 4; ++i) {
        const std::string b = tag(t, 0, i);
        auto id = client->call(2, kQuick, bytes_of(b), {.deadline = Clock::now() + 30s},
                               [&, b](RpcResponse r) {
                                 if (r.error || string_of(r.body) != b) ++wrong;
                                 if (!client->messenger().loop_of(2).in_loop_thread()) ++wrong;
                                 done.one();
                               });
        if (!id) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(done.wait(30s)) << done.count();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(client->counters().value("rpc.peer.2.ok"), static_cast<std::uint64_t>(kCalls));
  client.reset();
  server.reset();
}

}  // namespace
}  // namespace rmsg::testing
