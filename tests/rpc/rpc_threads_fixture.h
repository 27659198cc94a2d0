// The cluster of the RpcThreads tests (rpc_threads_test.cc): a hub messenger over 4 loops
// on LoopThreads with an RpcEndpoint as one of its services, peers over TCP loopback on 4
// more loops (each with an endpoint as the same service and the test methods below), and
// the helpers the tests share: a latch any thread counts down, a worker thread that
// answers responders, a ledger of calls.
//
// Threading: made and started on the test thread; the handlers run on the peers' loops;
// destroyed while the loops run (endpoints, then messengers, then the loops).
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rmsg/loop_threads.h"
#include "rmsg/messenger.h"
#include "rmsg/rpc.h"

namespace rmsg::testing::rpc_threads {

using namespace std::chrono_literals;

constexpr NodeId kHub = 1;
constexpr ServiceId kRpc = 9;
constexpr int kLoops = 4;
constexpr int kThreads = 8;
// Methods.
constexpr std::uint32_t kEcho = 1;     // peers: echo after a delay that varies per call
constexpr std::uint32_t kHubEcho = 2;  // hub: echo, answered by a worker thread
constexpr std::uint32_t kHold = 3;     // peers: keep the responder (the test answers it)
constexpr std::uint32_t kOnce = 4;     // peers: deduplicated, counts its runs
constexpr std::uint32_t kSlow = 5;     // peers: echo after 30 ms
constexpr std::uint32_t kQuick = 6;    // peers: echo at once
constexpr std::uint32_t kNote = 7;     // peers: one-way, counted

inline std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> v(s.size());
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}
inline std::string string_of(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Counts from any thread; wakes the waiting test thread at the total.
class Latch {
 public:
  explicit Latch(std::uint64_t total) : total_(total) {}
  void one() {
    const std::lock_guard lock(mu_);
    if (++n_ == total_) cv_.notify_all();
  }
  bool wait(Duration limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [this] { return n_ >= total_; });
  }
  std::uint64_t count() {
    const std::lock_guard lock(mu_);
    return n_;
  }

 private:
  const std::uint64_t total_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t n_ = 0;
};

inline MessengerOptions opts(NodeId id) {
  MessengerOptions o;
  o.node_id = id;
  o.backoff_initial = 2ms;
  o.backoff_max = 50ms;
  return o;
}

inline ConnectionParams tcp_to(const std::string& address) {
  ConnectionParams p;
  p.transport = Transport::tcp;
  p.peer = SocketAddress::parse(address).value();
  return p;
}

// Responders handed to a thread of their own, which answers them (echo).
class Worker {
 public:
  Worker() : thread_([this] { run(); }) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() {
    {
      const std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void take(RpcResponder r, std::vector<std::byte> body) {
    {
      const std::lock_guard lock(mu_);
      jobs_.emplace_back(std::move(r), std::move(body));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job.first.ok(job.second);  // off the loop that received the request
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<RpcResponder, std::vector<std::byte>>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

// The hub (4 loops, RPC as service kRpc) and its peers (one loop each, 4 loops in all).
struct Cluster {
  explicit Cluster(int n, std::size_t max_outstanding = 65536) : peers(n) {
    hub_loops = LoopThreads::create(kLoops).value();
    peer_loops = LoopThreads::create(kLoops).value();
    hub = Messenger::create(hub_loops->loops(), opts(kHub), [](NodeId, std::span<const std::byte>) {
          }).value();
    RpcOptions ro;
    ro.messenger = opts(kHub);
    ro.max_outstanding = max_outstanding;
    // The hub's session events: on the loop that owns their peer.
    ep = RpcEndpoint::create(*hub, kRpc, ro, [this](SessionEvent e) {
           if (!hub->loop_of(e.peer).in_loop_thread()) ++event_wrong_thread;
           if (e.kind == SessionEvent::Kind::connected) ++connected;
         }).value();
    const auto any = SocketAddress::parse("127.0.0.1:0").value();
    const auto hub_addr = hub->listen(any, tcp_to("127.0.0.1:1")).value();
    for (int i = 0; i < n; ++i) {
      const NodeId id = peer(i);
      auto m = Messenger::create(peer_loop(i), opts(id), [](NodeId, std::span<const std::byte>) {
               }).value();
      const auto addr = m->listen(any, tcp_to("127.0.0.1:1")).value();
      EXPECT_TRUE(m->add_peer(kHub, tcp_to(hub_addr)).ok());
      // Half the peers are reached by the hub's connects, the rest only connect to it.
      if (i % 2 == 0) {
        EXPECT_TRUE(hub->add_peer(id, tcp_to(addr)).ok());
      }
      RpcOptions po;
      po.messenger = opts(id);
      peer_ep.push_back(RpcEndpoint::create(*m, kRpc, po).value());
      peer_m.push_back(std::move(m));
      serve(i);
    }
  }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  ~Cluster() {
    // While the loops run: the endpoints first (each closes its shards on their loops),
    // then the messengers, then the loops.
    ep.reset();
    peer_ep.clear();
    hub.reset();
    peer_m.clear();
  }

  static NodeId peer(int i) { return 2 + static_cast<NodeId>(i); }
  EventLoop& peer_loop(int i) { return peer_loops->loop(static_cast<std::size_t>(i) % kLoops); }
  std::size_t owner(NodeId p) const {
    for (std::size_t i = 0; i < kLoops; ++i) {
      if (&hub_loops->loop(i) == &hub->loop_of(p)) return i;
    }
    return kLoops;
  }
  void start() {
    hub_loops->start();
    peer_loops->start();
    // The peers the hub cannot reach connect on their first message (to the hub's
    // default service, which drops it).
    for (auto& m : peer_m) EXPECT_TRUE(m->send(kHub, bytes_of("hello")).ok());
  }

  // The peers' methods (registered before the loops run).
  void serve(int i) {
    RpcEndpoint& e = *peer_ep.back();
    EventLoop* loop = &peer_loop(i);
    e.handle(kEcho, [loop](const RpcRequest& req, RpcResponder reply) {
      // Replies in another order than the requests: 0-600 us later, by call id.
      auto r = std::make_shared<RpcResponder>(std::move(reply));
      auto body = std::vector<std::byte>(req.body.begin(), req.body.end());
      loop->add_timer(std::chrono::microseconds((req.id * 7) % 4 * 200),
                      [r, body] { r->ok(body); });
    });
    e.handle(kSlow, [loop](const RpcRequest& req, RpcResponder reply) {
      auto r = std::make_shared<RpcResponder>(std::move(reply));
      auto body = std::vector<std::byte>(req.body.begin(), req.body.end());
      loop->add_timer(30ms, [r, body] { r->ok(body); });
    });
    e.handle(kQuick, [](const RpcRequest& req, RpcResponder reply) { reply.ok(req.body); });
    e.handle_oneway(kNote, [this](const RpcRequest&) {
      if (Latch* n = notes.load()) n->one();
    });
    auto& p = state[static_cast<std::size_t>(i)];
    e.handle(kHold, [&p, this](const RpcRequest&, RpcResponder reply) {
      {
        const std::lock_guard lock(p.mu);
        p.held.push_back(std::move(reply));
      }
      if (Latch* h = held.load()) h->one();
    });
    e.handle(kOnce,
             [&p](const RpcRequest&, RpcResponder reply) {
               reply.ok(bytes_of("run " + std::to_string(++p.runs)));
             },
             {.dedupe = true});
  }

  struct PeerState {
    std::mutex mu;
    std::vector<RpcResponder> held;  // kHold's
    std::atomic<int> runs{0};        // kOnce's
  };
  int peers;
  std::unique_ptr<LoopThreads> hub_loops;
  std::unique_ptr<LoopThreads> peer_loops;
  std::unique_ptr<Messenger> hub;
  std::unique_ptr<RpcEndpoint> ep;
  std::vector<std::unique_ptr<Messenger>> peer_m;
  std::vector<std::unique_ptr<RpcEndpoint>> peer_ep;
  std::array<PeerState, 16> state;
  std::atomic<Latch*> held{nullptr};   // kHold counts here when set
  std::atomic<Latch*> notes{nullptr};  // kNote likewise
  std::atomic<int> connected{0};       // the hub endpoint's connected events
  std::atomic<int> event_wrong_thread{0};
};

// A call's place in the ledger: (sender, peer, seq).
struct Ledger {
  Ledger(int n_senders, int n_peers, int n_each)
      : peers(n_peers),
        each(n_each),
        hits(static_cast<std::size_t>(n_senders * n_peers * n_each)) {}
  std::size_t slot(int sender, int peer, int seq) const {
    return static_cast<std::size_t>((sender * peers + peer) * each + seq);
  }
  int peers;
  int each;
  std::vector<std::atomic<int>> hits;
};

inline std::string tag(int sender, int peer, int seq) {
  return std::to_string(sender) + "/" + std::to_string(peer) + "/" + std::to_string(seq);
}

}  // namespace rmsg::testing::rpc_threads
