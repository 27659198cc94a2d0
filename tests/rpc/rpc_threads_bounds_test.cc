// RPC over several loops, part two (msg_threads_tests; TSan's tier runs it): cancel() from
// threads other than the call's loop racing with the replies (its answer exact, `done`
// once, the two agreeing), and the endpoint-wide bound on pending requests over a server
// of two loops with callers on two more.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rpc/rpc_threads_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
using namespace rpc_threads;

// A server on one loop (echo at once) and a client owning a messenger over two loops.
struct Pair {
  Pair() {
    server_loop = LoopThreads::create(1).value();
    client_loops = LoopThreads::create(2).value();
    RpcOptions so;
    so.messenger = opts(2);
    server = RpcEndpoint::create(server_loop->loop(0), so).value();
    server->handle(kQuick, [](const RpcRequest& req, RpcResponder reply) { reply.ok(req.body); });
    addr = server->messenger()
               .listen(SocketAddress::parse("127.0.0.1:0").value(), tcp_to("127.0.0.1:1"))
               .value();
    RpcOptions co;
    co.messenger = opts(1);
    client = RpcEndpoint::create(client_loops->loops(), co).value();
    EXPECT_TRUE(client->messenger().add_peer(2, tcp_to(addr)).ok());
    client_loops->start();
    server_loop->start();
  }
  ~Pair() {
    client.reset();
    server.reset();
  }
  std::size_t client_loop_of_server() const {
    for (std::size_t i = 0; i < client_loops->size(); ++i) {
      if (&client_loops->loop(i) == &client->messenger().loop_of(2)) return i;
    }
    return 0;
  }
  std::unique_ptr<LoopThreads> server_loop;
  std::unique_ptr<LoopThreads> client_loops;
  std::unique_ptr<RpcEndpoint> server;
  std::unique_ptr<RpcEndpoint> client;
  std::string addr;
};

// What each call's `done` saw, and what cancel() answered for it.
struct CancelLedger {
  void done(CallId id, const RpcResponse& r) {
    const std::lock_guard lock(mu);
    auto& e = calls[id];
    ++e.done;
    e.cancelled = r.error == make_error_code(RpcErrc::cancelled);
    e.bad = r.error && !e.cancelled;
  }
  void cancel_said(CallId id, bool yes) {
    const std::lock_guard lock(mu);
    calls[id].cancel_true += yes ? 1 : 0;
  }
  struct Entry {
    int done = 0;
    int cancel_true = 0;
    bool cancelled = false;
    bool bad = false;
  };
  std::mutex mu;
  std::unordered_map<CallId, Entry> calls;
};

// cancel() from threads other than the call's loop, racing with a reply that comes at
// once: true iff `done` saw cancelled, and `done` runs exactly once. The calls come from
// the cancelling thread itself (the call is still on its way to its loop), from another
// thread (the previous call's id), and from the loop (cancelled from the test thread).
TEST(RpcThreadsBounds, CancelFromOtherThreadsIsExact) {
  Pair p;
#if defined(__SANITIZE_THREAD__)
  constexpr int kEach = 150;
#else
  constexpr int kEach = 600;
#endif
  constexpr int kThreads = 4;
  constexpr int kOnLoop = 100;
  CancelLedger ledger;
  Latch all(kThreads * kEach + kOnLoop);
  const auto start_call = [&] {
    auto id = std::make_shared<std::atomic<CallId>>(0);
    auto r = p.client->call(2, kQuick, bytes_of("q"), {.deadline = Clock::now() + 30s},
                            [&, id](RpcResponse resp) {
                              // The id is published before call() returns, but `done` may
                              // run on the loop first: wait for it (call() never blocks).
                              while (id->load() == 0) std::this_thread::yield();
                              ledger.done(id->load(), resp);
                              all.one();
                            });
    EXPECT_TRUE(r.ok());
    id->store(r.value());
    return r.value();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CallId previous = 0;
      for (int i = 0; i < kEach; ++i) {
        const CallId id = start_call();
        // Right away, after a few yields (the reply may be in), or the previous call's.
        const int how = (i + t) % 3;
        if (how == 1) {
          for (int y = 0; y < i % 50; ++y) std::this_thread::yield();
        }
        const CallId target = how == 2 && previous != 0 ? previous : id;
        ledger.cancel_said(target, p.client->cancel(target));
        previous = id;
      }
    });
  }
  // Calls made on the call's loop, cancelled from this thread.
  for (int i = 0; i < kOnLoop; ++i) {
    CallId id = 0;
    p.client_loops->run_sync(p.client_loop_of_server(), [&] { id = start_call(); });
    ledger.cancel_said(id, p.client->cancel(id));
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(all.wait(60s)) << all.count();
  int cancelled = 0, ok = 0;
  {
    const std::lock_guard lock(ledger.mu);
    for (const auto& [id, e] : ledger.calls) {
      ASSERT_EQ(e.done, 1) << id;
      EXPECT_FALSE(e.bad) << id;
      EXPECT_EQ(e.cancel_true, e.cancelled ? 1 : 0) << id;
      (e.cancelled ? cancelled : ok) += 1;
    }
  }
  // Done calls stay done: a second cancel from here says so.
  const CallId first = [&] {
    const std::lock_guard lock(ledger.mu);
    return ledger.calls.begin()->first;
  }();
  EXPECT_FALSE(p.client->cancel(first));
  std::printf("[ cancel   ] %d calls from other threads: %d cancelled, %d replied first\n",
              cancelled + ok, cancelled, ok);
  EXPECT_EQ(cancelled + ok, kThreads * kEach + kOnLoop);
  EXPECT_EQ(p.client->counters().value("rpc.peer.2.cancelled"),
            static_cast<std::uint64_t>(cancelled));
}

// The endpoint-wide bound over a server of two loops: 8 callers (on two more loops) make
// 20 calls each; the server's handlers hand their responders to this thread, which
// answers one only when 6 are held: never more than 6 are in handlers, every call
// completes, each request ran once.
TEST(RpcThreadsBounds, EndpointWidePendingBoundOverTwoLoops) {
  constexpr std::size_t kBound = 6;
  constexpr int kCallers = 8;
  constexpr int kEach = 20;
  constexpr int kTotal = kCallers * kEach;
  auto server_loops = LoopThreads::create(2).value();
  auto caller_loops = LoopThreads::create(2).value();
  RpcOptions so;
  so.messenger = opts(1);
  so.max_pending_requests_total = kBound;
  auto server = RpcEndpoint::create(server_loops->loops(), so).value();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RpcResponder> held;
  std::atomic<int> in_handlers{0};
  std::atomic<int> most{0};
  server->handle(kHold, [&](const RpcRequest&, RpcResponder reply) {
    const int now = ++in_handlers;
    int m = most.load();
    while (now > m && !most.compare_exchange_weak(m, now)) {
    }
    {
      const std::lock_guard lock(mu);
      held.push_back(std::move(reply));
    }
    cv.notify_all();
  });
  const auto addr = server->messenger()
                        .listen(SocketAddress::parse("127.0.0.1:0").value(), tcp_to("127.0.0.1:1"))
                        .value();
  std::vector<std::unique_ptr<RpcEndpoint>> callers;
  for (int c = 0; c < kCallers; ++c) {
    RpcOptions co;
    co.messenger = opts(static_cast<NodeId>(10 + c));
    callers.push_back(
        RpcEndpoint::create(caller_loops->loop(static_cast<std::size_t>(c) % 2), co).value());
    EXPECT_TRUE(callers.back()->messenger().add_peer(1, tcp_to(addr)).ok());
  }
  server_loops->start();
  caller_loops->start();
  Latch all(kTotal);
  std::atomic<int> failed{0};
  for (auto& e : callers) {
    for (int i = 0; i < kEach; ++i) {
      ASSERT_TRUE(
          e->call(1, kHold, bytes_of("h"), {.deadline = Clock::now() + 60s}, [&](RpcResponse r) {
             if (r.error) ++failed;
             all.one();
           }).ok());
    }
  }
  std::size_t answered = 0;
  {
    std::unique_lock lock(mu);
    while (answered < static_cast<std::size_t>(kTotal)) {
      // Answer one only once the bound is reached (or nothing more can come).
      const bool ready = cv.wait_for(lock, 30s, [&] {
        return held.size() - answered == kBound || held.size() == static_cast<std::size_t>(kTotal);
      });
      ASSERT_TRUE(ready) << held.size() << " held, " << answered << " answered";
      ASSERT_LE(held.size() - answered, kBound);
      RpcResponder r = std::move(held[answered++]);
      --in_handlers;  // before the answer: the server's own count drops later
      lock.unlock();
      r.ok(bytes_of("r"));  // from this thread: posted to the request's loop
      lock.lock();
    }
  }
  ASSERT_TRUE(all.wait(60s)) << all.count();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_LE(most.load(), static_cast<int>(kBound));
  EXPECT_EQ(most.load(), static_cast<int>(kBound));
  EXPECT_GT(server->counters().value("rpc.server.deferred"), 0u);
  std::printf("[ bound    ] %d calls, at most %d in handlers, %llu deferred at the server\n",
              kTotal, most.load(),
              static_cast<unsigned long long>(server->counters().value("rpc.server.deferred")));
  callers.clear();
  server.reset();
}

}  // namespace
}  // namespace rmsg::testing
