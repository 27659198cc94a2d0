// Routing accepted RDMA connections to the loop that owns them (Soft-RoCE guest): a
// listener on loop A with a router, a target manager on loop B, each loop on its own
// thread, clients on a third loop (the test's thread). Connect requests with affinity 1
// go to B, with 2 to A's own target, with 0 nowhere (A keeps them): each accepted stream
// must come out on its owner's thread, carry data both ways byte-exact, and sit on a
// structure built by the owner's manager. A router to a gone or limit-full target
// rejects cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "cross_thread.h"
#include "kit/rdma_fixture.h"
#include "rmsg/connection_manager.h"
#include "rmsg/log.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kToB = 1;
constexpr std::uint64_t kToA = 2;
constexpr std::uint64_t kToGone = 3;

ConnectionParams rdma_params() {
  ConnectionParams p;
  p.transport = Transport::rdma;
  p.rdma = test_options();
  p.rdma.retry_count = 6;  // rxe retries for ever at 7
  return p;
}

// A server loop on its own thread with its manager; accepted streams echo. Everything is
// made on the test's thread before the loop runs, and goes on the loop's own thread
// once it stops.
class ServerLoop {
 public:
  explicit ServerLoop(const ConnectionManagerOptions& options = {}) {
    auto l = EventLoop::create();
    EXPECT_TRUE(l.ok());
    loop_ = std::move(l).value();
    auto m = ConnectionManager::create(*loop_, options);
    EXPECT_TRUE(m.ok());
    cm_ = std::move(m).value();
  }
  ServerLoop(const ServerLoop&) = delete;
  ServerLoop& operator=(const ServerLoop&) = delete;
  ~ServerLoop() { stop(); }

  EventLoop& loop() { return *loop_; }
  ConnectionManager& cm() { return *cm_; }
  AcceptCallback on_accept() {
    return [this](Stream s) {
      if (!loop_->in_loop_thread() || std::this_thread::get_id() != thread_id_) ++wrong_thread_;
      echoes_.emplace_back(std::move(s));
      ++accepted_;
    };
  }
  void start() {
    thread_ = std::thread([this] {
      thread_id_ = std::this_thread::get_id();
      static_cast<void>(loop_->run());
      // On the loop's thread: what the manager counted, then everything of the loop goes.
      for (const char* name :
           {"structures.created", "structures.reused", "routing.handed_off", "routing.adopted",
            "routing.target_gone", "routing.migrate_failed", "limit.accepts_rejected"}) {
        counters_[name] = cm_->counters().value(name);
      }
      echoes_.clear();
      listener_ = Listener();
      cm_.reset();
    });
  }
  void stop() {
    if (!thread_.joinable()) return;
    loop_->stop();
    thread_.join();
  }
  // Runs `task` on the loop and waits for it (the test thread has nothing else to run).
  void run_on_loop(std::function<void()> task) {
    std::promise<void> done;
    loop_->post([&] {
      task();
      done.set_value();
    });
    done.get_future().wait();
  }
  void hold(Listener l) { listener_ = std::move(l); }
  int accepted() const { return accepted_; }
  int wrong_thread() const { return wrong_thread_; }
  std::uint64_t counter(const std::string& name) { return counters_[name]; }  // after stop()

 private:
  std::unique_ptr<EventLoop> loop_;
  Listener listener_;  // goes on the loop's thread, before the loop
  std::unique_ptr<ConnectionManager> cm_;
  std::deque<Echo> echoes_;
  std::thread thread_;
  std::thread::id thread_id_;
  std::atomic<int> accepted_{0}, wrong_thread_{0};
  std::map<std::string, std::uint64_t> counters_;
};

class CmRoute : public RdmaTest {
 protected:
  void SetUp() override {
    set_log_handler(log_to_stderr, LogLevel::warn);
    RdmaTest::SetUp();
    if (HasFatalFailure()) return;
    auto m = ConnectionManager::create(loop());
    ASSERT_TRUE(m.ok());
    client_ = std::move(m).value();
  }
  void TearDown() override {
    clients_.clear();
    client_.reset();
    set_log_handler({});
  }

  // `a` listens with `router`; returns the port.
  std::uint16_t listen_routed(ServerLoop& a, AcceptRouter router) {
    auto l = a.cm().listen(address(), rdma_params(), a.on_accept(), std::move(router));
    EXPECT_TRUE(l.ok()) << l.error().message();
    if (!l) return 0;
    const auto port = l.value().port();
    a.hold(std::move(l).value());
    return port;
  }

  // Starts one connect with `affinity`; its result lands in results_[i].
  void connect(std::uint16_t port, std::uint64_t affinity, std::size_t i) {
    ConnectionParams p = rdma_params();
    p.peer = address();
    p.peer.set_port(port);
    p.affinity = affinity;
    client_->connect(p, [this, i](Result<Stream> s, const ConnectReport&) {
      if (!s) {
        errors_[i] = s.error();
        return;
      }
      clients_[i] = std::make_unique<EchoClient>(32 * 1024);
      clients_[i]->start(std::move(s).value());
    });
  }
  bool settled(std::size_t i) const {
    return errors_.count(i) != 0 || (clients_.count(i) != 0 && clients_.at(i)->done());
  }

  std::unique_ptr<ConnectionManager> client_;
  std::map<std::size_t, std::unique_ptr<EchoClient>> clients_;
  std::map<std::size_t, std::error_code> errors_;
};

TEST_F(CmRoute, AcceptsReachTheOwningLoopsThreadAndItsPool) {
  ServerLoop a, b;
  auto target_b = b.cm().accept_routed(rdma_params(), b.on_accept());
  auto target_a = a.cm().accept_routed(rdma_params(), a.on_accept());
  ASSERT_TRUE(target_b.ok() && target_a.ok());
  const AcceptTarget to_b = target_b.value(), to_a = target_a.value();
  const auto port = listen_routed(a, [to_a, to_b](std::uint64_t affinity) {
    return affinity == kToB ? to_b : affinity == kToA ? to_a : AcceptTarget{};
  });
  ASSERT_NE(port, 0);
  a.start();
  b.start();
  constexpr std::size_t kEach = 8;  // routed to B, and to A's own target
  constexpr std::size_t kNone = 2;  // without affinity: A keeps them
  constexpr std::size_t kAll = 2 * kEach + kNone;
  for (std::size_t i = 0; i < kAll; ++i) {
    connect(port, i < kEach ? kToB : i < 2 * kEach ? kToA : 0, i);
  }
  EXPECT_TRUE(loop().run_for(
      [&] {
        for (std::size_t i = 0; i < kAll; ++i) {
          if (!settled(i)) return false;
        }
        return true;
      },
      30s));
  for (const auto& [i, ec] : errors_) ADD_FAILURE() << "connect " << i << ": " << ec.message();
  for (const auto& [i, c] : clients_) EXPECT_TRUE(c->exact()) << "connect " << i;
  EXPECT_EQ(clients_.size(), kAll);
  EXPECT_TRUE(loop().run_for([&] { return a.accepted() + b.accepted() == kAll; }, 10s));
  a.stop();
  b.stop();
  EXPECT_EQ(b.accepted(), static_cast<int>(kEach));
  EXPECT_EQ(a.accepted(), static_cast<int>(kEach + kNone));
  EXPECT_EQ(a.wrong_thread() + b.wrong_thread(), 0);
  // B built the structures of its streams; A handed those over before building anything.
  EXPECT_EQ(b.counter("routing.adopted"), kEach);
  EXPECT_EQ(b.counter("structures.created") + b.counter("structures.reused"), kEach);
  EXPECT_EQ(a.counter("routing.handed_off"), kEach);
  EXPECT_EQ(a.counter("routing.adopted"), 0u);  // its own target is accepted in place
  EXPECT_EQ(a.counter("structures.created") + a.counter("structures.reused"), kEach + kNone);
}

TEST_F(CmRoute, RoutesToAGoneOrLimitFullTargetAreRejected) {
  ConnectionManagerOptions one;
  one.max_connections = 1;
  ServerLoop a, b(one);
  auto target_b = b.cm().accept_routed(rdma_params(), b.on_accept());
  ASSERT_TRUE(target_b.ok());
  // A target whose manager goes (on its loop) before any request reaches it.
  auto gone_cm = ConnectionManager::create(b.loop());
  ASSERT_TRUE(gone_cm.ok());
  auto target_gone = gone_cm.value()->accept_routed(
      rdma_params(), [](Stream) { ADD_FAILURE() << "a gone target accepted"; });
  ASSERT_TRUE(target_gone.ok());
  const AcceptTarget to_b = target_b.value(), to_gone = target_gone.value();
  const auto port = listen_routed(
      a, [to_b, to_gone](std::uint64_t affinity) { return affinity == kToGone ? to_gone : to_b; });
  ASSERT_NE(port, 0);
  a.start();
  b.start();
  b.run_on_loop([&] { gone_cm.value().reset(); });

  connect(port, kToGone, 0);
  ASSERT_TRUE(loop().run_for([&] { return settled(0); }, 20s));
  ASSERT_EQ(errors_.count(0), 1u);
  EXPECT_TRUE(errors_[0] == make_error_code(Errc::resource_exhausted)) << errors_[0].message();
  // B takes one connection, then is full: the next one routed to it is rejected.
  connect(port, kToB, 1);
  ASSERT_TRUE(loop().run_for([&] { return settled(1); }, 20s));
  EXPECT_EQ(errors_.count(1), 0u);
  connect(port, kToB, 2);
  ASSERT_TRUE(loop().run_for([&] { return settled(2); }, 20s));
  ASSERT_EQ(errors_.count(2), 1u);
  EXPECT_TRUE(errors_[2] == make_error_code(Errc::resource_exhausted)) << errors_[2].message();
  ASSERT_EQ(clients_.count(1), 1u);
  EXPECT_TRUE(clients_[1]->exact());
  a.stop();
  b.stop();
  EXPECT_EQ(a.counter("routing.target_gone"), 1u);
  EXPECT_EQ(a.counter("routing.handed_off"), 2u);
  EXPECT_EQ(a.counter("structures.created"), 0u);  // A built nothing for anyone
  EXPECT_EQ(b.counter("routing.adopted"), 2u);
  EXPECT_EQ(b.counter("limit.accepts_rejected"), 1u);
  EXPECT_EQ(b.counter("structures.created"), 1u);
  EXPECT_EQ(b.accepted(), 1);
  EXPECT_EQ(a.accepted(), 0);
}

}  // namespace
}  // namespace rmsg::testing
