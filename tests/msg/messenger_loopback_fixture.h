// Two (or more) messengers on one loop with a manual clock, over loopback streams with a
// fault injector per side: the deterministic failure matrix runs on this.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "kit/seed.h"
#include "msg/msg_harness.h"

namespace rmsg::testing {

class MessengerLoopbackTest : public ::testing::Test {
 protected:
  static constexpr NodeId kA = 1;
  static constexpr NodeId kB = 2;
  static constexpr std::uint16_t kPortA = 7001;
  static constexpr std::uint16_t kPortB = 7002;

  struct Side {
    Node node;
    std::shared_ptr<LoopbackFaults> connect = std::make_shared<LoopbackFaults>();
    std::shared_ptr<LoopbackFaults> accept = std::make_shared<LoopbackFaults>();
  };

  void SetUp() override {
    auto l = EventLoop::create({.clock = clock_, .seed = seed_for("loop")});
    ASSERT_TRUE(l.ok());
    loop_ = std::move(l).value();
  }
  void TearDown() override {
    // A Release build refuses and counts what a Debug build asserts on.
    for (const Side* s : {&a_, &b_}) {
      if (s->node.m) {
        EXPECT_EQ(s->node.counter("msg.illegal_transitions"), 0u);
      }
    }
    a_.node.m.reset();
    b_.node.m.reset();
    loop_->run_for([] { return false; }, std::chrono::milliseconds(1));
  }

  MessengerOptions options(NodeId id) const {
    MessengerOptions o;
    o.node_id = id;
    o.handshake_timeout = std::chrono::seconds(1);
    o.backoff_initial = std::chrono::milliseconds(10);
    o.backoff_max = std::chrono::milliseconds(200);
    return o;
  }

  // Creates (or re-creates: a restart) the messenger of `side`, listening on `port`.
  void start(Side& side, std::uint16_t port, MessengerOptions o) {
    side.node.m.reset();
    Node* n = &side.node;
    auto m = MessengerAccess::create(
        *loop_, o, std::make_unique<LoopbackStreams>(*loop_, side.connect, side.accept),
        [n](NodeId from, std::span<const std::byte> p) { n->ledger.on_message(from, p); },
        [n](SessionEvent e) { n->on_event(std::move(e)); });
    ASSERT_TRUE(m.ok());
    side.node.m = std::move(m).value();
    ASSERT_TRUE(side.node.m->listen(loopback_params(port).peer, loopback_params(port)).ok());
  }
  void start_a(MessengerOptions o) { start(a_, kPortA, o); }
  void start_b(MessengerOptions o) { start(b_, kPortB, o); }
  void start_both() {
    start_a(options(kA));
    start_b(options(kB));
    ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  }
  // B knows A too (both sides can connect).
  void both_know_each_other() {
    ASSERT_TRUE(b_.node.m->add_peer(kA, loopback_params(kPortA)).ok());
  }

  void send_a(int n, std::size_t len = 32) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(a_.node.send_next(kB, len).ok());
  }
  void send_b(int n, std::size_t len = 32) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(b_.node.send_next(kA, len).ok());
  }
  // Runs the loop until `done` or 60 s of virtual time.
  bool run(const std::function<bool()>& done) {
    return loop_->run_for(done, std::chrono::seconds(60));
  }
  bool b_has_all_from_a() {
    return b_.node.ledger.last[kA] == a_.node.next_index[kB] &&
           a_.node.m->session_info(kB).value_or(Messenger::SessionInfo{}).queued == 0;
  }
  bool a_has_all_from_b() {
    return a_.node.ledger.last[kB] == b_.node.next_index[kA] &&
           b_.node.m->session_info(kA).value_or(Messenger::SessionInfo{}).queued == 0;
  }
  void expect_clean() {
    expect_exactly_once(a_.node, kA, b_.node, kB);
    expect_exactly_once(b_.node, kB, a_.node, kA);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::unique_ptr<EventLoop> loop_;
  Side a_;
  Side b_;
};

}  // namespace rmsg::testing
