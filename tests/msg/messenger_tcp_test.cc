// The failure scenarios that can be produced for real over TCP on the host: connections
// killed under the sessions (a real RST), a server restart, both sides reconnecting; and
// the soak (100,000 messages each way, random kills).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "msg/messenger_real_fixture.h"

namespace rmsg::testing {
namespace {

using Kind = SessionEvent::Kind;

class MessengerTcpTest : public MessengerRealTest {
 protected:
  ConnectionParams params() const override {
    ConnectionParams p;
    p.transport = Transport::tcp;
    return p;
  }
  std::string host() const override { return "127.0.0.1"; }
};

TEST_F(MessengerTcpTest, KilledConnectionsLoseNothing) {
  start_both();
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(a_.node.send_next(kB, 100).ok());
      ASSERT_TRUE(b_.node.send_next(kA, 100).ok());
    }
    // Kill while the round is in flight (A's side or B's side by turns).
    ASSERT_TRUE(run([&] { return b_.node.ledger.delivered >= 200u * round + 50; }));
    EXPECT_GE((round % 2 ? a_.streams : b_.streams)->kill_all(), 1);
  }
  ASSERT_TRUE(run([&] {
    return all_delivered(a_.node, kA, b_.node, kB, 1000) &&
           all_delivered(b_.node, kB, a_.node, kA, 1000);
  }));
  expect_exactly_once(a_.node, kA, b_.node, kB);
  expect_exactly_once(b_.node, kB, a_.node, kA);
  EXPECT_GE(a_.node.count(Kind::disconnected), 5);
  EXPECT_EQ(a_.node.count(Kind::reset), 0);
}

TEST_F(MessengerTcpTest, BothSidesReconnecting) {
  start_both(/*both_ways=*/true);
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(a_.node.send_next(kB).ok());
      ASSERT_TRUE(b_.node.send_next(kA).ok());
    }
    ASSERT_TRUE(run([&] { return a_.node.ledger.delivered >= 100u * round + 20; }));
    a_.streams->kill_all();
    b_.streams->kill_all();
  }
  ASSERT_TRUE(run([&] {
    return all_delivered(a_.node, kA, b_.node, kB, 500) &&
           all_delivered(b_.node, kB, a_.node, kA, 500);
  }));
  expect_exactly_once(a_.node, kA, b_.node, kB);
  expect_exactly_once(b_.node, kB, a_.node, kA);
  EXPECT_TRUE(a_.node.m->session_info(kB)->connected);
  EXPECT_TRUE(b_.node.m->session_info(kA)->connected);
}

TEST_F(MessengerTcpTest, ServerRestartIsReportedAndTheNewSessionWorks) {
  start_both();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return all_delivered(a_.node, kA, b_.node, kB, 100); }));
  const std::uint16_t port = SocketAddress::parse(b_.address).value().port();
  b_.node.m.reset();
  b_.node = Node{};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return a_.node.count(Kind::failed) >= 1; }));
  start(b_, kB, port);  // same port, same node id, new process state
  ASSERT_TRUE(run([&] { return a_.node.count(Kind::reset) == 1; }));
  const auto& hb = a_.node.handed_back[kB];
  for (std::uint64_t i = 101; i <= 110; ++i) EXPECT_TRUE(hb.contains(i)) << i;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return b_.node.ledger.last[kA] == 120; }));
  EXPECT_EQ(b_.node.ledger.delivered, 10u);
  EXPECT_EQ(b_.node.ledger.doubled, 0u);
}

TEST_F(MessengerTcpTest, ClientRestartIsAResetOnTheServer) {
  start_both();
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(b_.node.send_next(kA).ok());
  ASSERT_TRUE(run([&] { return all_delivered(b_.node, kB, a_.node, kA, 50); }));
  a_.node.m.reset();  // A goes; B cannot reach A (no address) and keeps what it sends
  a_.node = Node{};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b_.node.send_next(kA).ok());
  start(a_, kA, 0);  // A again: a new session cookie
  ASSERT_TRUE(a_.node.m->add_peer(kB, peer_params(b_)).ok());
  a_.node.next_index[kB] = 1;
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return b_.node.count(Kind::reset) == 1; }));
  const auto& hb = b_.node.handed_back[kA];
  for (std::uint64_t i = 51; i <= 60; ++i) EXPECT_TRUE(hb.contains(i)) << i;
  ASSERT_TRUE(run([&] { return b_.node.ledger.last[kA] == 2; }));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(b_.node.send_next(kA).ok());
  ASSERT_TRUE(run([&] { return a_.node.ledger.last[kB] == 65; }));
  EXPECT_EQ(a_.node.ledger.delivered, 5u);
  EXPECT_EQ(b_.node.ledger.doubled + a_.node.ledger.doubled, 0u);
}

TEST_F(MessengerTcpTest, Soak100kMessagesWithRandomKills) {
  start_both(/*both_ways=*/true);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer trees look for memory errors, not volume: a fifth, kills as often.
  const int kills = soak(20000, 1024, 400, 4000, std::chrono::seconds(30));
#else
  const int kills = soak(100000, 1024, 2000, 20000, std::chrono::seconds(30));
#endif
  EXPECT_GE(kills, 5);
}

// Keepalive over real TCP (docs/messenger.md, Flow control): B's messenger is on its own
// loop, which stops running after the handshake, so its kernel keeps the connection up
// but nothing answers A's keepalives. A closes it with idle_timeout within the configured
// timeout (plus one tick), and no sooner than the last byte from B allows.
TEST(MessengerTcpKeepalive, APeerThatStopsAnsweringIsFoundDeadWithinTheTimeout) {
  auto la = EventLoop::create({});
  auto lb = EventLoop::create({});
  ASSERT_TRUE(la.ok() && lb.ok());
  std::vector<SessionEvent> events;
  int delivered = 0;
  MessengerOptions oa;
  oa.node_id = 1;
  oa.keepalive_interval = std::chrono::milliseconds(50);
  oa.idle_timeout = std::chrono::milliseconds(400);
  MessengerOptions ob = oa;
  ob.node_id = 2;
  auto a = Messenger::create(
      *la.value(), oa, [](NodeId, std::span<const std::byte>) {},
      [&](SessionEvent e) { events.push_back(std::move(e)); });
  auto b =
      Messenger::create(*lb.value(), ob, [&](NodeId, std::span<const std::byte>) { ++delivered; });
  ASSERT_TRUE(a.ok() && b.ok());
  ConnectionParams p;
  p.transport = Transport::tcp;
  auto bound = b.value()->listen(SocketAddress::parse("127.0.0.1:0").value(), p);
  ASSERT_TRUE(bound.ok());
  p.peer = SocketAddress::parse(bound.value()).value();
  ASSERT_TRUE(a.value()->add_peer(2, p).ok());
  ASSERT_TRUE(a.value()->send(2, std::vector<std::byte>(16)).ok());
  // Both loops, by turns, until B has the message and A has seen B's ack.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((delivered == 0 || a.value()->session_info(2)->queued != 0) &&
         std::chrono::steady_clock::now() < until) {
    la.value()->run_for([] { return false; }, std::chrono::milliseconds(1));
    lb.value()->run_for([] { return false; }, std::chrono::milliseconds(1));
  }
  ASSERT_EQ(delivered, 1);
  ASSERT_EQ(a.value()->session_info(2)->queued, 0u);
  // From here only A's loop runs; the last byte from B came before this point.
  const auto t0 = la.value()->now();
  const auto lost = [&] {
    for (const auto& e : events) {
      if (e.kind == SessionEvent::Kind::disconnected) return true;
    }
    return false;
  };
  ASSERT_TRUE(la.value()->run_for(lost, std::chrono::seconds(5)));
  const auto waited = la.value()->now() - t0;
  const SessionEvent* d = nullptr;
  for (const auto& e : events) {
    if (e.kind == SessionEvent::Kind::disconnected) d = &e;
  }
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->error, make_error_code(MessengerErrc::idle_timeout));
  EXPECT_EQ(a.value()->counters().value("msg.errors.idle_timeout"), 1u);
  EXPECT_GE(a.value()->counters().value("msg.keepalives_sent"), 3u);
  EXPECT_LE(waited, oa.idle_timeout + oa.idle_timeout / 4 + std::chrono::milliseconds(300));
  std::printf("[ keepalive] dead peer found after %lld ms (idle_timeout 400 ms)\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
  a.value().reset();
  b.value().reset();
}

}  // namespace
}  // namespace rmsg::testing

namespace rmsg::testing {
namespace {

// A process that runs node `id` (its own loop and messenger) and sends one message to
// node 2 at `address`; it runs until killed. Forked from a test whose loop is driven by
// the test's own thread (no other threads exist to fork from).
pid_t spawn_node(NodeId id, const std::string& address) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  auto loop = EventLoop::create({}).value();
  MessengerOptions o;
  o.node_id = id;
  o.backoff_initial = std::chrono::milliseconds(2);
  o.backoff_max = std::chrono::milliseconds(50);
  auto m = Messenger::create(*loop, o, [](NodeId, std::span<const std::byte>) {}).value();
  ConnectionParams p;
  p.transport = Transport::tcp;
  p.peer = SocketAddress::parse(address).value();
  (void)m->add_peer(2, p);
  (void)m->send(2, numbered(1));
  loop->run_for([] { return false; }, std::chrono::seconds(60));
  ::_exit(0);
}

struct Killed {
  pid_t pid;
  ~Killed() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

// Review #3 over real TCP with real processes: while node 1's process is alive, a second
// process with node id 1 is refused (duplicate_node) and the first keeps its session;
// after the first is killed with -9, the next one's hello is accepted promptly as a
// restart (reset peer_restarted) and its message is delivered.
TEST(MessengerTcpTakeover, ADuplicateIsRefusedAndARestartAfterKillIsAccepted) {
  auto loop = EventLoop::create({}).value();
  MessengerOptions o;
  o.node_id = 2;
  std::vector<SessionEvent> events;
  int delivered = 0;
  auto b = Messenger::create(
               *loop, o, [&](NodeId, std::span<const std::byte>) { ++delivered; },
               [&](SessionEvent e) { events.push_back(std::move(e)); })
               .value();
  ConnectionParams p;
  p.transport = Transport::tcp;
  const auto addr = b->listen(SocketAddress::parse("127.0.0.1:0").value(), p).value();
  auto resets = [&] {
    int n = 0;
    for (const auto& e : events) {
      n += e.kind == SessionEvent::Kind::reset &&
           e.error == make_error_code(MessengerErrc::peer_restarted);
    }
    return n;
  };
  Killed first{spawn_node(1, addr)};
  ASSERT_GT(first.pid, 0);
  ASSERT_TRUE(loop->run_for([&] { return delivered == 1; }, std::chrono::seconds(10)));
  Killed second{spawn_node(1, addr)};  // the same node id, alive at the same time
  ASSERT_GT(second.pid, 0);
  ASSERT_TRUE(loop->run_for([&] { return b->counters().value("msg.duplicate_node") >= 2; },
                            std::chrono::seconds(10)));
  EXPECT_EQ(resets(), 0);
  EXPECT_EQ(delivered, 1);
  ::kill(first.pid, SIGKILL);
  ::waitpid(first.pid, nullptr, 0);
  first.pid = -1;
  // The second process keeps trying (its backoff is at most 50 ms): now it is the restart.
  const auto t0 = loop->now();
  ASSERT_TRUE(
      loop->run_for([&] { return resets() == 1 && delivered == 2; }, std::chrono::seconds(10)));
  EXPECT_LT(loop->now() - t0, o.handshake_timeout);
  b.reset();
}

}  // namespace
}  // namespace rmsg::testing
