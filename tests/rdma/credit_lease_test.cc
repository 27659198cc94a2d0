// The shared-receive mode's bookkeeping (rdma/srq/credit_lease.h) simulated: one receiver
// whose pool of C*G + L blocks serves many senders, with random sending, reading, idle
// releases and the SRQ's limit alarm. No SEND ever finds the pool without a posted
// receive (no RNR), the windows never exceed the pool, busy connections get leases, idle
// ones give them back, a connection beyond C is refused, and everything drains.
#include "rdma/srq/credit_lease.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "kit/seed.h"
#include "rdma/credits.h"

namespace rmsg::rdma {
namespace {

struct Msg {
  wire::MsgType type;
  std::uint16_t credits;
  std::uint32_t released = 0;  // a release message's payload
};
constexpr auto kRelease = static_cast<wire::MsgType>(4);  // docs/protocol.md: release

// One connection: the sender S (its credits towards the pool) and the receiver's side of
// it (R's window, R's credits for the credit messages it sends back to S).
struct Conn {
  Credits s;                   // S's credits at R
  Credits r;                   // R's credits at S (S's own per-stream ring of kBackBlocks)
  CreditLease lease;           // R's window for S
  std::uint32_t s_posted = 0;  // receives posted at S (R's credit messages land there)
  std::uint32_t unread = 0;    // data messages R holds unread
  std::deque<Msg> to_r, to_s;
  std::uint64_t data_sent = 0;
  bool idle = false;     // S sends no data (it releases its lease instead)
  bool stalled = false;  // R's application does not read this connection
};

constexpr std::uint32_t kBackBlocks = 8;

struct Pool {
  ReceiveBudget budget;
  std::uint64_t posted;
  explicit Pool(const ReceiveBudgetConfig& c) : budget(c), posted(budget.blocks()) {}

  void level_changed() {
    if (budget.config().low_water != 0 && posted < budget.config().low_water &&
        !budget.pressure()) {
      budget.on_limit_reached();
    }
    budget.on_posted_level(posted);
  }
  // A consumed block goes back to the SRQ: its credit is owed, or withheld under pressure.
  void repost(Conn& c) {
    ++posted;
    if (!c.lease.on_reposted(budget.pressure())) {
      budget.give_back(1);
    } else {
      c.r.on_reposted();
    }
    level_changed();
  }
};

void send_to_r(Conn& c, wire::MsgType type, std::uint32_t released = 0) {
  ASSERT_GE(c.s.available(), 1u);
  c.s.on_sent();
  c.to_r.push_back({type, c.s.take_owed(), released});
}

// R sends a credit message to S when it owes enough, adding a lease when S is busy.
void r_flush(Pool& pool, Conn& c) {
  if (!c.r.should_send_credit()) return;
  const std::uint32_t n = pool.budget.lease(c.lease.wanted(c.r.threshold()));
  c.lease.grow(n);
  if (n > 0) c.r.on_reposted(n);  // returned as credits with the owed ones
  c.r.on_sent();
  c.to_s.push_back({wire::MsgType::credit, c.r.take_owed()});
}

void deliver_to_r(Pool& pool, Conn& c) {
  ASSERT_GT(pool.posted, 0u) << "a SEND arrived with no receive posted in the SRQ (RNR)";
  const Msg m = c.to_r.front();
  c.to_r.pop_front();
  --pool.posted;
  pool.level_changed();
  ASSERT_TRUE(c.r.on_granted(m.credits));
  if (m.type == wire::MsgType::data) {
    c.lease.on_data();
    ++c.unread;
  } else {
    if (m.type == kRelease) {
      ASSERT_TRUE(c.lease.on_release(m.released)) << "released below G";
      pool.budget.give_back(m.released);
    }
    pool.repost(c);
  }
  r_flush(pool, c);
}

void deliver_to_s(Conn& c) {
  ASSERT_GT(c.s_posted, 0u);
  const Msg m = c.to_s.front();
  c.to_s.pop_front();
  ASSERT_TRUE(c.s.on_granted(m.credits)) << "more credits than the window's ceiling";
  c.s.on_reposted();  // a credit message's receive is re-posted at once
  if (c.s.should_send_credit()) send_to_r(c, wire::MsgType::credit);
}

void check_windows(const Pool& pool, const std::vector<Conn>& conns) {
  std::uint64_t sum = 0, leased = 0;
  for (const Conn& c : conns) {
    sum += c.lease.window();
    leased += c.lease.leased();
    ASSERT_GE(c.lease.window(), c.lease.guaranteed());
  }
  ASSERT_LE(sum, pool.budget.blocks());
  ASSERT_EQ(leased, pool.budget.leased());
}

TEST(CreditLease, ManySendersOnASmallPoolNeverOverrunLoseOrStarve) {
  constexpr std::uint32_t kG = 4, kCeiling = 32, kConns = 24;
  const ReceiveBudgetConfig config{kConns, kG, /*lease_blocks=*/40, /*lease_step=*/4,
                                   /*low_water=*/64};
  std::mt19937 rng(static_cast<std::uint32_t>(rmsg::testing::seed_for("credit lease")));
  Pool pool(config);
  std::vector<Conn> conns(kConns);
  for (Conn& c : conns) {
    ASSERT_TRUE(pool.budget.admit());
    c.lease.reset(kG, kCeiling);
    c.s.reset(kG, kBackBlocks, kCeiling);     // S: the peer's G and recv_window
    c.r.reset(kBackBlocks, kG, 0, kCeiling);  // R: owes up to its window's ceiling
    c.s_posted = kBackBlocks;
  }
  EXPECT_FALSE(pool.budget.admit()) << "a connection beyond C was admitted";
  EXPECT_EQ(pool.budget.refused(), 1u);

  std::uint64_t grew = 0;
  for (int step = 0; step < 300000; ++step) {
    Conn& c = conns[rng() % kConns];
    if (rng() % 5000 == 0 && !c.stalled) c.idle = !c.idle;
    // The middle third: the readers of two thirds of the connections stall, so blocks
    // holding unread data pile up and the SRQ's limit alarm fires.
    if (step == 100000 || step == 200000) {
      for (std::uint32_t i = 0; i < kConns * 2 / 3; ++i) {
        conns[i].stalled = step == 100000;
        conns[i].idle = false;  // and their senders keep sending
      }
    }
    switch (rng() % 5) {
      case 0:  // S writes, or (idle) releases what it holds beyond G
        if (c.idle) {
          if (const auto n = release_due(c.s.available(), kG, true); n > 0 && c.s.can_send_data()) {
            send_to_r(c, kRelease, n);
            ASSERT_TRUE(c.s.drop(n));
          }
        } else if (c.s.can_send_data()) {
          send_to_r(c, wire::MsgType::data);
          ++c.data_sent;
        }
        break;
      case 1:  // R's application reads one message (stalled readers: the alarm fires)
        if (c.unread > 0 && !c.stalled) {
          --c.unread;
          pool.repost(c);
          r_flush(pool, c);
        }
        break;
      case 2:
        if (!c.to_s.empty()) {
          ASSERT_NO_FATAL_FAILURE(deliver_to_s(c));
        }
        break;
      default:
        if (!c.to_r.empty()) {
          ASSERT_NO_FATAL_FAILURE(deliver_to_r(pool, c));
        }
    }
    if (c.lease.leased() > 0) ++grew;
    if (step % 997 == 0) {
      ASSERT_NO_FATAL_FAILURE(check_windows(pool, conns));
    }
  }
  EXPECT_GT(pool.budget.peak_leased(), 0u) << "no busy connection got a lease";
  EXPECT_GT(grew, 0u);
  EXPECT_GT(pool.budget.alarms(), 0u) << "the limit alarm never fired: the test misses it";
  std::printf("peak leased %u of %u, alarms %llu\n", pool.budget.peak_leased(), config.lease_blocks,
              static_cast<unsigned long long>(pool.budget.alarms()));

  // Drain: everyone idle, R reads everything, the network delivers everything.
  for (Conn& c : conns) {
    c.idle = true;
    c.stalled = false;
  }
  for (int round = 0;; ++round) {
    ASSERT_LT(round, 100000) << "did not settle";
    bool moved = false;
    for (Conn& c : conns) {
      while (c.unread > 0) {
        --c.unread;
        pool.repost(c);
        r_flush(pool, c);
        moved = true;
      }
      if (const auto n = release_due(c.s.available(), kG, true); n > 0 && c.s.can_send_data()) {
        send_to_r(c, kRelease, n);
        ASSERT_TRUE(c.s.drop(n));
        moved = true;
      }
      while (!c.to_r.empty()) {
        ASSERT_NO_FATAL_FAILURE(deliver_to_r(pool, c));
        moved = true;
      }
      while (!c.to_s.empty()) {
        ASSERT_NO_FATAL_FAILURE(deliver_to_s(c));
        moved = true;
      }
    }
    if (!moved) break;
  }
  ASSERT_NO_FATAL_FAILURE(check_windows(pool, conns));
  // Idle: every sender can still send (no starvation) and holds at most G + 1 credits;
  // leases are back but what credits returned grew after the last release.
  for (const Conn& c : conns) {
    EXPECT_TRUE(c.s.can_send_data()) << c.s.available();
    EXPECT_LE(c.s.available(), kG + 1);
    // Nothing in flight or unread: the window is exactly what S holds plus what R owes.
    EXPECT_EQ(c.lease.window(), c.s.available() + c.r.owed());
  }
  EXPECT_FALSE(pool.budget.pressure());
  EXPECT_EQ(pool.posted, pool.budget.blocks()) << "a receive block was lost";
  std::uint64_t sent = 0;
  for (const Conn& c : conns) sent += c.data_sent;
  EXPECT_GT(sent, 10000u);
  std::printf("data messages %llu\n", static_cast<unsigned long long>(sent));
}

TEST(CreditLease, WindowStaysWithinGuaranteedAndCeiling) {
  CreditLease l;
  l.reset(4, 10);
  EXPECT_EQ(l.wanted(2), 0u) << "not busy: no lease";
  l.on_data();
  l.on_data();
  EXPECT_EQ(l.wanted(2), 6u);
  l.grow(6);
  EXPECT_EQ(l.window(), 10u);
  EXPECT_TRUE(l.on_reposted(false));  // no shrink wanted: owed
  EXPECT_FALSE(l.on_reposted(true));  // withheld
  EXPECT_EQ(l.window(), 9u);
  EXPECT_FALSE(l.on_release(6)) << "below G";
  EXPECT_FALSE(l.on_release(0));
  EXPECT_TRUE(l.on_release(5));
  EXPECT_EQ(l.window(), 4u);
  EXPECT_TRUE(l.on_reposted(true)) << "never withheld at G";
  EXPECT_EQ(release_due(9, 4, true), 4u);
  EXPECT_EQ(release_due(9, 4, false), 0u);
  EXPECT_EQ(release_due(5, 4, true), 0u);
}

TEST(CreditLease, BudgetAdmitsCLendsOnlyLAndStopsLendingUnderTheAlarm) {
  ReceiveBudget b({/*connections=*/2, /*guaranteed=*/4, /*lease_blocks=*/6, /*lease_step=*/4,
                   /*low_water=*/3});
  EXPECT_EQ(b.blocks(), 14u);
  EXPECT_TRUE(b.admit());
  EXPECT_TRUE(b.admit());
  EXPECT_FALSE(b.admit());
  EXPECT_EQ(b.refused(), 1u);
  EXPECT_EQ(b.lease(10), 4u) << "one grant is at most lease_step";
  EXPECT_EQ(b.lease(10), 2u) << "never more than L in all";
  EXPECT_EQ(b.lease(1), 0u);
  b.give_back(3);
  b.on_limit_reached();
  EXPECT_EQ(b.lease(1), 0u) << "no lease while the alarm is raised";
  EXPECT_FALSE(b.on_posted_level(5));
  EXPECT_TRUE(b.on_posted_level(6)) << "the alarm ends at twice the low-water mark: re-arm";
  EXPECT_EQ(b.lease(1), 1u);
  b.leave(4);
  EXPECT_TRUE(b.admit()) << "a connection's end frees its place";
  EXPECT_EQ(b.alarms(), 1u);
}

}  // namespace
}  // namespace rmsg::rdma
