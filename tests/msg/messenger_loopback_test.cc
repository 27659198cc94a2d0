// The failure matrix over loopback streams with injected faults and a manual clock: each
// case ends with every message delivered exactly once and in order, or a reported reset.
#include <gtest/gtest.h>

#include "msg/messenger_loopback_fixture.h"

namespace rmsg::testing {
namespace {

using std::chrono::milliseconds;
using Kind = SessionEvent::Kind;

TEST_F(MessengerLoopbackTest, DeliversBothWaysInOrder) {
  start_both();
  send_a(100);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  send_b(50);  // B answers over the connection A made
  ASSERT_TRUE(run([&] { return a_has_all_from_b(); }));
  expect_clean();
  EXPECT_EQ(b_.node.ledger.delivered, 100u);
  EXPECT_EQ(a_.node.count(Kind::connected), 1);
  EXPECT_EQ(b_.node.count(Kind::connected), 1);
  EXPECT_EQ(a_.node.counter("msg.connects"), 1u);
  EXPECT_EQ(b_.node.counter("msg.accepts"), 1u);
}

}  // namespace
}  // namespace rmsg::testing

namespace rmsg::testing {
namespace {

const std::error_code kReset = make_error_code(Errc::connection_reset);

// Runs until `n` has seen `count` events of `kind`.
#define RUN_UNTIL_EVENTS(side, kind, n) \
  ASSERT_TRUE(run([&] { return (side).node.count(kind) >= (n); }))

TEST_F(MessengerLoopbackTest, ConnectFailuresBeforeTheHandshakeBackOffAndRecover) {
  start_both();
  a_.connect->fail_connects(make_error_code(Errc::connection_refused), 3);
  const auto t0 = loop_->now();
  send_a(20);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  expect_clean();
  EXPECT_EQ(a_.node.count(Kind::failed), 3);
  EXPECT_EQ(a_.node.counter("msg.connect_failures"), 3u);
  // Three backoff steps: at least 5 + 10 + 20 ms (the lower halves of 10, 20, 40 ms).
  EXPECT_GE(loop_->now() - t0, milliseconds(35));
}

TEST_F(MessengerLoopbackTest, ConnectionLostDuringTheBanner) {
  start_both();
  b_.accept->fail_read(kReset, 20);  // inside A's banner
  send_a(20);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  expect_clean();
  EXPECT_EQ(a_.node.count(Kind::failed), 1);
  EXPECT_EQ(b_.node.counter("msg.errors.stream"), 1u);
  EXPECT_EQ(b_.node.counter("msg.accepts"), 2u);
}

TEST_F(MessengerLoopbackTest, ClientIdentLost) {
  start_both();
  a_.connect->fail_write(kReset, 36);  // the banner goes, the hello does not
  send_a(20);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  expect_clean();
  EXPECT_EQ(a_.node.count(Kind::failed), 1);
  EXPECT_EQ(b_.node.counter("msg.decisions.accept"), 1u);
}

TEST_F(MessengerLoopbackTest, ServerIdentLostResumesTheSameSession) {
  start_both();
  send_b(10);  // B holds messages for A (it cannot connect: no address), sent on accept
  a_.connect->fail_read(kReset, 36);  // A reads B's banner, then loses server_ident
  send_a(10);
  ASSERT_TRUE(run([&] { return b_has_all_from_a() && a_has_all_from_b(); }));
  expect_clean();
  EXPECT_EQ(b_.node.counter("msg.decisions.accept"), 2u);
  EXPECT_EQ(a_.node.count(Kind::reset) + b_.node.count(Kind::reset), 0);
  EXPECT_GE(b_.node.counter("msg.replayed"), 1u);  // B's messages went out twice
}

TEST_F(MessengerLoopbackTest, ReconnectOkLostThenRetry) {
  start_both();
  send_a(10);
  send_b(10);
  ASSERT_TRUE(run([&] { return b_has_all_from_a() && a_has_all_from_b(); }));
  a_.connect->reset();
  RUN_UNTIL_EVENTS(a_, Kind::disconnected, 1);
  a_.connect->fail_read(kReset, 36);  // the reconnect's answer is lost
  send_a(10);
  send_b(10);
  ASSERT_TRUE(run([&] { return b_has_all_from_a() && a_has_all_from_b(); }));
  expect_clean();
  // B established connect_seq 2 when it accepted; A never heard: its next attempt asks
  // for 2 again and is told to retry above it.
  EXPECT_GE(b_.node.counter("msg.decisions.retry"), 1u);
  EXPECT_GE(a_.node.counter("msg.handshake.retry"), 1u);
  EXPECT_EQ(a_.node.count(Kind::reset) + b_.node.count(Kind::reset), 0);
  EXPECT_EQ(a_.node.m->session_info(kB)->connect_seq, b_.node.m->session_info(kA)->connect_seq);
}

TEST_F(MessengerLoopbackTest, ConnectionLostAfterTheHandshakeMidStream) {
  start_both();
  a_.connect->fail_write(kReset, 30000);
  b_.accept->fail_write(kReset, 20000);
  send_a(1000, 100);
  send_b(1000, 100);
  ASSERT_TRUE(run([&] { return b_has_all_from_a() && a_has_all_from_b(); }));
  expect_clean();
  EXPECT_EQ(b_.node.ledger.delivered - b_.node.ledger.doubled, 1000u);
  EXPECT_GE(a_.node.count(Kind::disconnected), 1);
  EXPECT_GE(a_.node.counter("msg.replayed") + b_.node.counter("msg.replayed"), 1u);
}

TEST_F(MessengerLoopbackTest, FaultDuringReplay) {
  MessengerOptions oa = options(kA);
  start_a(oa);
  MessengerOptions ob = options(kB);
  ob.ack_every = 1000;  // B acks late: much is in flight when it breaks
  ob.ack_delay = milliseconds(1000);
  start_b(ob);
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  a_.connect->fail_write(kReset, 40000);
  send_a(600, 100);
  RUN_UNTIL_EVENTS(a_, Kind::disconnected, 1);
  const auto replayed_before = a_.node.counter("msg.replayed");
  a_.connect->fail_write(kReset, 10000);  // the replay itself breaks
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  expect_clean();
  EXPECT_EQ(a_.node.count(Kind::disconnected), 2);
  EXPECT_GT(a_.node.counter("msg.replayed"), replayed_before);
  // The reconnect tells A what B delivered: the replay starts after it, so nothing B had
  // is sent again.
  EXPECT_EQ(b_.node.counter("msg.duplicates_dropped"), 0u);
}

TEST_F(MessengerLoopbackTest, ServerRestartIsAResetWithHandback) {
  start_both();
  send_a(50);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  const std::uint64_t old_delivered = b_.node.ledger.delivered;
  b_.node.m.reset();  // B goes away (graceful close)
  b_.node = Node{};
  send_a(20);  // queued; A's attempts are refused meanwhile
  RUN_UNTIL_EVENTS(a_, Kind::failed, 2);
  start_b(options(kB));  // B is back: same node id, a new session cookie
  RUN_UNTIL_EVENTS(a_, Kind::reset, 1);
  const SessionEvent* reset = nullptr;
  for (const auto& e : a_.node.events) {
    if (e.kind == Kind::reset) reset = &e;
  }
  ASSERT_NE(reset, nullptr);
  EXPECT_EQ(reset->error, make_error_code(MessengerErrc::session_unknown));
  // Never written (B was down), except what A wrote before it saw B's close frame.
  EXPECT_GE(reset->unsent.size(), 19u);
  EXPECT_EQ(old_delivered, 50u);
  const auto& hb = a_.node.handed_back[kB];
  for (std::uint64_t i = 51; i <= 70; ++i) EXPECT_TRUE(hb.contains(i)) << i;
  send_a(10);  // the new session: delivered
  ASSERT_TRUE(run([&] { return b_.node.ledger.last[kA] == 80; }));
  EXPECT_EQ(b_.node.ledger.delivered, 10u);
  EXPECT_EQ(b_.node.ledger.doubled, 0u);
}

TEST_F(MessengerLoopbackTest, ClientRestartIsAResetOnTheServer) {
  start_both();
  send_a(5);
  send_b(30);  // over A's connection
  ASSERT_TRUE(run([&] { return b_has_all_from_a() && a_has_all_from_b(); }));
  a_.node.m.reset();
  a_.node = Node{};
  send_b(10);  // B cannot reach A (no address): queued
  ASSERT_TRUE(run([&] { return b_.node.count(Kind::disconnected) >= 1; }));
  start_a(options(kA));
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  a_.node.next_index[kB] = 5;  // A's indices continue (the ledger at B spans both)
  send_a(5);
  RUN_UNTIL_EVENTS(b_, Kind::reset, 1);
  const SessionEvent& reset = b_.node.events.back().kind == Kind::reset
                                  ? b_.node.events.back()
                                  : b_.node.events[b_.node.events.size() - 2];
  EXPECT_EQ(reset.error, make_error_code(MessengerErrc::peer_restarted));
  const auto& hb = b_.node.handed_back[kA];
  for (std::uint64_t i = 31; i <= 40; ++i) EXPECT_TRUE(hb.contains(i)) << i;
  ASSERT_TRUE(run([&] { return b_.node.ledger.last[kA] == 10; }));
  send_b(3);
  ASSERT_TRUE(run([&] { return a_.node.ledger.last[kB] == 43; }));
  EXPECT_EQ(a_.node.ledger.delivered, 3u);
  EXPECT_EQ(b_.node.ledger.doubled, 0u);
}

TEST_F(MessengerLoopbackTest, BothSidesReconnectingAtOnceEndInOneSession) {
  // Delays keep both attempts in flight together; jitter decides who starts first. Each
  // delay and seed must end with one connection, everything delivered once.
  std::uint64_t races = 0;
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE(round);
    start_both();
    both_know_each_other();
    const Duration d = milliseconds(5 + 7 * round);
    a_.connect->delay(d);
    b_.connect->delay(d);
    a_.accept->delay(d);
    b_.accept->delay(d);
    send_a(20);
    send_b(20);
    ASSERT_TRUE(run([&] { return b_has_all_from_a() && a_has_all_from_b(); }));
    for (int kill = 0; kill < 3; ++kill) {
      a_.connect->reset();
      b_.connect->reset();
      send_a(20);
      send_b(20);
      ASSERT_TRUE(run([&] { return b_has_all_from_a() && a_has_all_from_b(); }));
    }
    // Settled: nothing flaps any more.
    const auto opened = a_.node.counter("msg.opened") + b_.node.counter("msg.opened");
    loop_->run_for([] { return false; }, std::chrono::seconds(2));
    EXPECT_EQ(a_.node.counter("msg.opened") + b_.node.counter("msg.opened"), opened);
    EXPECT_TRUE(a_.node.m->session_info(kB)->connected);
    EXPECT_TRUE(b_.node.m->session_info(kA)->connected);
    expect_clean();
    EXPECT_EQ(a_.node.count(Kind::reset) + b_.node.count(Kind::reset), 0);
    for (const Side* s : {&a_, &b_}) {
      races += s->node.counter("msg.decisions.wait") + s->node.counter("msg.decisions.race_lost");
    }
    a_.node.m.reset();
    b_.node.m.reset();
    a_ = Side{};
    b_ = Side{};
  }
  EXPECT_GE(races, 8u) << "the delays should make the attempts cross";
}

TEST_F(MessengerLoopbackTest, SimultaneousFirstConnectMakesOneSession) {
  start_both();
  both_know_each_other();
  for (auto* f : {a_.connect.get(), b_.connect.get(), a_.accept.get(), b_.accept.get()}) {
    f->delay(milliseconds(30));
  }
  send_a(10);
  send_b(10);
  ASSERT_TRUE(run([&] { return b_has_all_from_a() && a_has_all_from_b(); }));
  expect_clean();
  EXPECT_GE(a_.node.counter("msg.decisions.wait") + b_.node.counter("msg.decisions.wait") +
                a_.node.counter("msg.decisions.accept") + b_.node.counter("msg.decisions.accept"),
            1u);
  EXPECT_EQ(a_.node.count(Kind::reset) + b_.node.count(Kind::reset), 0);
  loop_->run_for([] { return false; }, std::chrono::seconds(3));
  EXPECT_TRUE(a_.node.m->session_info(kB)->connected);
  EXPECT_TRUE(b_.node.m->session_info(kA)->connected);
}

TEST_F(MessengerLoopbackTest, ReplayBoundReachedRefusesThenDeliversWhatItAccepted) {
  MessengerOptions oa = options(kA);
  oa.session_max_messages = 50;
  oa.window_messages = 4;
  start_a(oa);
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  send_a(50);  // B is not there yet: all 50 wait
  EXPECT_TRUE(a_.node.send_next(kB).is(Errc::resource_exhausted));
  EXPECT_EQ(a_.node.counter("msg.send_refused"), 1u);
  start_b(options(kB));
  std::size_t max_in_flight = 0;
  a_.connect->fail_write(kReset, 1000);  // and a fault on the way, with a full store
  ASSERT_TRUE(run([&] {
    max_in_flight = std::max(max_in_flight, a_.node.m->session_info(kB)->in_flight);
    return b_has_all_from_a();
  }));
  expect_clean();
  EXPECT_EQ(b_.node.ledger.last[kA], 50u);
  EXPECT_LE(max_in_flight, 4u);
  EXPECT_TRUE(a_.node.send_next(kB).ok());  // room again
}

TEST_F(MessengerLoopbackTest, MessengerWideBoundSpansSessions) {
  MessengerOptions oa = options(kA);
  oa.total_max_messages = 30;
  start_a(oa);
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  ASSERT_TRUE(a_.node.m->add_peer(3, loopback_params(7003)).ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(a_.node.send_next(kB).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(a_.node.send_next(3).ok());
  EXPECT_TRUE(a_.node.send_next(3).is(Errc::resource_exhausted));
  EXPECT_TRUE(a_.node.send_next(kB).is(Errc::resource_exhausted));
}

TEST_F(MessengerLoopbackTest, LossyPolicyResetsInsteadOfReplaying) {
  start_both();
  a_.node.m->set_policy(kB, SessionPolicy::lossy);
  a_.connect->fail_write(kReset, 5000);
  send_a(200, 100);
  RUN_UNTIL_EVENTS(a_, Kind::reset, 1);
  const SessionEvent* reset = nullptr;
  for (const auto& e : a_.node.events) {
    if (e.kind == Kind::reset) reset = &e;
  }
  ASSERT_NE(reset, nullptr);
  EXPECT_EQ(reset->error, make_error_code(MessengerErrc::lossy_fault));
  EXPECT_FALSE(reset->unknown.empty());
  send_a(5);
  ASSERT_TRUE(run([&] { return b_.node.ledger.last[kA] == 205; }));
  expect_clean();
  EXPECT_EQ(a_.node.counter("msg.replayed"), 0u);
  EXPECT_GE(b_.node.count(Kind::reset), 1);  // B learns when A comes back afresh
}

TEST_F(MessengerLoopbackTest, DestroyingAMessengerClosesGracefully) {
  start_both();
  send_a(10);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  b_.node.m.reset();  // a close frame, then shutdown_write + close
  RUN_UNTIL_EVENTS(a_, Kind::disconnected, 1);
  EXPECT_EQ(a_.node.events.back().error, make_error_code(MessengerErrc::peer_closed));
  EXPECT_EQ(a_.node.counter("msg.errors.peer_closed"), 1u);
  EXPECT_EQ(a_.node.counter("msg.errors.stream"), 0u);  // not a reset
}

TEST_F(MessengerLoopbackTest, HalfOpenConnectionTimesOutAndRecovers) {
  MessengerOptions oa = options(kA);
  oa.keepalive_interval = milliseconds(200);
  oa.idle_timeout = milliseconds(1000);
  start_a(oa);
  start_b(options(kB));
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  send_a(10);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  // Idle: A's keepalives and B's answers keep the connection alive.
  loop_->run_for([] { return false; }, std::chrono::seconds(3));
  EXPECT_EQ(a_.node.count(Kind::disconnected), 0);
  EXPECT_GE(a_.node.counter("msg.keepalives_sent"), 10u);
  // Nothing from B arrives any more (B's side of every connection stalls): half-open.
  b_.accept->delay(std::chrono::hours(1));
  const auto t0 = loop_->now();
  send_a(10);
  RUN_UNTIL_EVENTS(a_, Kind::disconnected, 1);
  EXPECT_EQ(a_.node.events.back().error, make_error_code(MessengerErrc::idle_timeout));
  // idle_timeout after the last byte from B, which came at most one keepalive before t0;
  // seen on a tick (idle / 4).
  EXPECT_GE(loop_->now() - t0, milliseconds(1000 - 200));
  EXPECT_LE(loop_->now() - t0, milliseconds(1000 + 250));
  b_.accept->delay(Duration::zero());  // the network is back: new connections work
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  expect_clean();
}

TEST_F(MessengerLoopbackTest, WrongNodeAtTheAddressFails) {
  start_a(options(kA));
  start_b(options(3));  // B's port, another node
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  send_a(1);
  RUN_UNTIL_EVENTS(a_, Kind::failed, 2);
  EXPECT_EQ(a_.node.events[0].error, make_error_code(MessengerErrc::wrong_node));
  EXPECT_GE(b_.node.counter("msg.errors.wrong_node"), 2u);
  EXPECT_EQ(b_.node.ledger.delivered, 0u);
}

TEST_F(MessengerLoopbackTest, HandshakeCapQueuesAttempts) {
  MessengerOptions oa = options(kA);
  oa.max_handshakes = 1;
  start_a(oa);
  std::vector<std::unique_ptr<Side>> peers;
  for (NodeId id = 2; id <= 5; ++id) {
    auto side = std::make_unique<Side>();
    start(*side, static_cast<std::uint16_t>(7000 + id), options(id));
    ASSERT_TRUE(a_.node.m->add_peer(id, loopback_params(static_cast<std::uint16_t>(7000 + id))));
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(a_.node.send_next(id).ok());
    peers.push_back(std::move(side));
  }
  ASSERT_TRUE(run([&] {
    for (auto& p : peers) {
      if (p->node.ledger.delivered < 5) return false;
    }
    return true;
  }));
  EXPECT_EQ(a_.node.counter("msg.handshake_waits"), 3u);
  for (auto& p : peers) EXPECT_EQ(p->node.ledger.doubled, 0u);
}

}  // namespace
}  // namespace rmsg::testing
