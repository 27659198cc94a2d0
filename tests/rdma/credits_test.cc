// Credits simulated between two peers with random application behaviour: no SEND ever
// lacks a posted receive, credit-only messages never answer each other in a loop, and
// whatever one side wants to send eventually goes (no starvation).
#include "rdma/credits.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>

#include "kit/seed.h"

namespace rmsg::rdma {
namespace {

struct Msg {
  wire::MsgType type;
  std::uint16_t credits;
};

struct Peer {
  Credits credits;
  std::uint32_t posted = 0;  // receives posted here
  std::uint32_t unread = 0;  // data messages received, not yet consumed
  std::deque<Msg> inbox;     // in flight towards this peer
  std::uint64_t data_sent = 0;
  std::uint64_t credit_msgs = 0;
};

void send(Peer& from, Peer& to, wire::MsgType type) {
  ASSERT_GE(from.credits.available(), 1u);
  from.credits.on_sent();
  to.inbox.push_back({type, from.credits.take_owed()});
  if (type == wire::MsgType::credit) ++from.credit_msgs;
}

void deliver_one(Peer& p) {
  ASSERT_GT(p.posted, 0u) << "a SEND arrived with no receive posted (RNR)";
  const Msg m = p.inbox.front();
  p.inbox.pop_front();
  --p.posted;
  ASSERT_TRUE(p.credits.on_granted(m.credits)) << "more credits returned than sent";
  if (m.type == wire::MsgType::data) {
    ++p.unread;
  } else {
    ++p.posted;  // control messages re-post their receive at once
    p.credits.on_reposted();
  }
}

void flush_control(Peer& p, Peer& other) {
  if (p.credits.should_send_credit()) send(p, other, wire::MsgType::credit);
}

TEST(Credits, RandomTrafficNeverOverrunsStarvesOrLoops) {
  for (std::uint32_t blocks : {4u, 5u, 16u, 64u}) {
    std::mt19937 rng(
        static_cast<std::uint32_t>(rmsg::testing::seed_for("blocks " + std::to_string(blocks))));
    Peer a, b;
    a.posted = b.posted = blocks;
    a.credits.reset(blocks, blocks);
    b.credits.reset(blocks, blocks);
    for (int step = 0; step < 200000; ++step) {
      Peer& p = (rng() & 1) ? a : b;
      Peer& q = (&p == &a) ? b : a;
      switch (rng() % 4) {
        case 0:  // the application writes if it can
          if (p.credits.can_send_data()) {
            send(p, q, wire::MsgType::data);
            ++p.data_sent;
          }
          break;
        case 1:  // the application reads one message, its block is re-posted
          if (p.unread > 0) {
            --p.unread;
            ++p.posted;
            p.credits.on_reposted();
            flush_control(p, q);
          }
          break;
        default:  // the network delivers
          if (!p.inbox.empty()) {
            ASSERT_NO_FATAL_FAILURE(deliver_one(p));
            flush_control(p, q);
          }
      }
    }
    // Drain: both applications read everything; the network delivers everything. No
    // credit message may be sent without a reason, so this must settle.
    int rounds = 0;
    while (!a.inbox.empty() || !b.inbox.empty() || a.unread || b.unread) {
      ASSERT_LT(++rounds, 100000) << "credit messages loop";
      for (Peer* p : {&a, &b}) {
        Peer& q = (p == &a) ? b : a;
        while (p->unread > 0) {
          --p->unread;
          ++p->posted;
          p->credits.on_reposted();
        }
        flush_control(*p, q);
        if (!p->inbox.empty()) {
          ASSERT_NO_FATAL_FAILURE(deliver_one(*p));
          flush_control(*p, q);
        }
      }
    }
    // Settled with every buffer free: each side can send data again (no starvation).
    EXPECT_TRUE(a.credits.can_send_data()) << a.credits.available();
    EXPECT_TRUE(b.credits.can_send_data()) << b.credits.available();
    EXPECT_GT(a.data_sent + b.data_sent, 1000u);
    // Each credit-only message returns >= threshold receives, and a side owes one receive
    // per message it got, so credit messages C and data messages D satisfy
    // C * threshold <= D + C: credit messages cannot feed on each other.
    const std::uint64_t c = a.credit_msgs + b.credit_msgs, d = a.data_sent + b.data_sent;
    EXPECT_LE(c * (a.credits.threshold() - 1), d) << c << " credit vs " << d << " data";
  }
}

TEST(Credits, OneWayStreamReturnsCreditsWithoutDataBack) {
  Peer w, r;
  w.posted = r.posted = 8;
  w.credits.reset(8, 8);
  r.credits.reset(8, 8);
  for (int i = 0; i < 10000; ++i) {
    while (w.credits.can_send_data()) send(w, r, wire::MsgType::data);
    while (!r.inbox.empty()) ASSERT_NO_FATAL_FAILURE(deliver_one(r));
    while (r.unread > 0) {
      --r.unread;
      ++r.posted;
      r.credits.on_reposted();
      flush_control(r, w);
    }
    while (!w.inbox.empty()) {
      ASSERT_NO_FATAL_FAILURE(deliver_one(w));
      flush_control(w, r);
    }
  }
  EXPECT_TRUE(w.credits.can_send_data());
}

}  // namespace
}  // namespace rmsg::rdma
