// Flow control's pure logic: OutQueue's lanes, fragments and refusal episodes, the
// Reassembler's fragment rules, and both together through reconnects (random schedule).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "rmsg/messenger.h"
#include "session/admission.h"
#include "session/in_state.h"
#include "session/out_queue.h"
#include "session/reassembly.h"

namespace rmsg::session {
namespace {

Payload bytes(std::size_t n, int v = 1) {
  return Payload(n, static_cast<std::byte>(v));
}

struct Written {
  Seq seq;
  std::size_t size;
  bool more;
};

Written write_one(OutQueue& q) {
  const auto c = q.next();
  EXPECT_TRUE(c.has_value());
  if (!c) return {0, 0, false};
  const Written w{c->seq, c->bytes.size(), c->more};
  q.mark_written();
  return w;
}

TEST(OutQueueLanes, LargeMessageGoesInChunksAndPriorityPassesBetweenThem) {
  QueueBudget budget{100, 1000};
  OutQueue q({.fragment_size = 10}, budget);
  ASSERT_EQ(q.push(bytes(35)).value(), 1u);
  ASSERT_EQ(q.push(bytes(5), Lane::priority).value(), 2u);
  ASSERT_EQ(q.push(bytes(5)).value(), 3u);
  Written w = write_one(q);  // priority first, though numbered after 1
  EXPECT_EQ(w.seq, 2u);
  EXPECT_FALSE(w.more);
  w = write_one(q);
  EXPECT_EQ(w.seq, 1u);
  EXPECT_EQ(w.size, 10u);
  EXPECT_TRUE(w.more);
  ASSERT_EQ(q.push(bytes(3), Lane::priority).value(), 4u);
  EXPECT_EQ(write_one(q).seq, 4u);  // between two chunks of 1
  for (int i = 0; i < 2; ++i) {
    w = write_one(q);
    EXPECT_EQ(w.seq, 1u);
    EXPECT_TRUE(w.more);
  }
  w = write_one(q);
  EXPECT_EQ(w.seq, 1u);
  EXPECT_EQ(w.size, 5u);
  EXPECT_FALSE(w.more);
  EXPECT_EQ(write_one(q).seq, 3u);  // bulk keeps its order
  EXPECT_FALSE(q.next().has_value());
  EXPECT_EQ(q.in_flight(), 4u);
}

TEST(OutQueueLanes, RewindRestartsAPartlyWrittenMessageAndAckDropsIt) {
  QueueBudget budget{100, 1000};
  OutQueue q({.fragment_size = 4}, budget);
  ASSERT_TRUE(q.push(bytes(10)).ok());
  ASSERT_TRUE(q.push(bytes(2)).ok());
  write_one(q);
  write_one(q);
  q.rewind();
  auto c = q.next();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->offset, 0u);
  EXPECT_TRUE(c->first);
  EXPECT_TRUE(c->replay);
  EXPECT_TRUE(q.ack(1).is(Errc::protocol_error));  // never written whole
  write_one(q);
  write_one(q);
  write_one(q);  // 1 complete
  ASSERT_TRUE(q.ack(1).ok());
  // A partly written message the peer acknowledges (it had it from before) is dropped.
  write_one(q);
  EXPECT_FALSE(q.next().has_value());
  q.rewind();
  ASSERT_TRUE(q.push(bytes(9)).ok());
  write_one(q);                     // 2 (whole) again
  EXPECT_EQ(write_one(q).seq, 3u);  // 3's first chunk
  ASSERT_TRUE(q.ack(2).ok());
  EXPECT_EQ(q.next()->seq, 3u);
  EXPECT_EQ(q.next()->offset, 4u);
}

TEST(OutQueueLanes, WithdrawOfAPartlyWrittenMessageFinishesItFirst) {
  QueueBudget budget{100, 1000};
  OutQueue q({.fragment_size = 4}, budget);
  ASSERT_TRUE(q.push(bytes(10)).ok());
  write_one(q);
  ASSERT_TRUE(q.withdraw(1));
  EXPECT_EQ(write_one(q).size, 4u);
  EXPECT_EQ(write_one(q).size, 2u);
  EXPECT_EQ(q.bytes(), 0u);  // dropped once complete
  q.rewind();
  EXPECT_EQ(q.next()->bytes.size(), 0u);  // the replay carries it empty
}

TEST(OutQueueLanes, OneWritableEventPerRefusalBelowHalf) {
  QueueBudget budget{100, 1000};
  OutQueue q({.max_messages = 4}, budget);
  EXPECT_FALSE(q.take_writable());  // no refusal: never
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.push(bytes(1)).ok());
  while (q.next()) q.mark_written();
  EXPECT_TRUE(q.push(bytes(1)).is(Errc::resource_exhausted));
  EXPECT_TRUE(q.push(bytes(1)).is(Errc::resource_exhausted));  // the same episode
  EXPECT_EQ(budget.refused_queues, 1u);
  ASSERT_TRUE(q.ack(1).ok());
  EXPECT_FALSE(q.take_writable());  // 3 of 4: above half
  ASSERT_TRUE(q.ack(2).ok());
  EXPECT_TRUE(q.take_writable());  // 2 of 4
  EXPECT_FALSE(q.take_writable());
  EXPECT_EQ(budget.refused_queues, 0u);
  ASSERT_TRUE(q.ack(4).ok());
  EXPECT_FALSE(q.take_writable());
}

// A send refused on a foreign thread (its reservation failed, msg/admission.h) starts the
// same episode as a refusal by push(): the loop's queue ends it with one writable.
TEST(OutQueueLanes, AReservationRefusedElsewhereStartsTheSameEpisode) {
  const QueueLimits limits{.max_messages = 4};
  Admission admission(limits, 100, 1000);
  OutQueue q(limits, admission.total(), &admission.session(7));
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(admission.try_reserve(7, 1));
    q.push_reserved(bytes(1));
  }
  while (q.next()) q.mark_written();
  EXPECT_FALSE(admission.try_reserve(7, 1));  // as a send from another thread
  EXPECT_TRUE(q.refused());
  EXPECT_EQ(admission.total().refused_queues, 1u);
  EXPECT_TRUE(q.push(bytes(1)).is(Errc::resource_exhausted));  // the same episode
  EXPECT_EQ(admission.total().refused_queues, 1u);
  ASSERT_TRUE(q.ack(1).ok());
  EXPECT_FALSE(q.take_writable());  // 3 of 4
  ASSERT_TRUE(q.ack(2).ok());
  EXPECT_TRUE(q.take_writable());
  EXPECT_FALSE(q.take_writable());
  EXPECT_EQ(admission.total().refused_queues, 0u);
  EXPECT_FALSE(admission.session(7).refused);
}

// The messenger-wide budget: a peer refused because of the total (its own budget has
// room) ends its episode once the total is at half, whoever freed it.
TEST(OutQueueLanes, TheTotalBudgetEndsEpisodesOfOtherQueues) {
  const QueueLimits limits{.max_messages = 10};
  Admission admission(limits, 4, 1000);
  OutQueue a(limits, admission.total(), &admission.session(1));
  OutQueue b(limits, admission.total(), &admission.session(2));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(a.push(bytes(1)).ok());
  EXPECT_FALSE(admission.try_reserve(2, 1));  // the total is full
  EXPECT_TRUE(b.refused());
  EXPECT_FALSE(b.take_writable());
  while (a.next()) a.mark_written();
  ASSERT_TRUE(a.ack(2).ok());
  EXPECT_TRUE(b.take_writable());
  EXPECT_FALSE(a.take_writable());  // a was never refused
  EXPECT_EQ(admission.total().refused_queues, 0u);
}

// The bulk lane's share: a priority lane that never empties spends its credit (each chunk
// its bytes + chunk_charge), then one bulk chunk goes; a bulk message starts that way only
// ahead of every priority message not yet started.
TEST(OutQueueLanes, PriorityThatNeverEmptiesLeavesBulkItsShare) {
  QueueBudget budget{100, 1000};
  const QueueLimits limits{.fragment_size = 10, .priority_credit = 30, .chunk_charge = 5};
  OutQueue q(limits, budget);
  ASSERT_EQ(q.push(bytes(35)).value(), 1u);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(q.push(bytes(5), Lane::priority).ok());
  std::vector<Seq> order;
  while (q.next()) order.push_back(write_one(q).seq);
  // 3 priority chunks of 5 (+5) spend the 30, then one chunk of 1; its last one too.
  const std::vector<Seq> want{2,  3,  4,  1, 5,  6,  7,  1,  8,  9,  10, 1,
                              11, 12, 13, 1, 14, 15, 16, 17, 18, 19, 20, 21};
  EXPECT_EQ(order, want);

  OutQueue r(limits, budget);  // priority 1..5 queued before bulk 6, 7..12 after it
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(r.push(bytes(5), Lane::priority).ok());
  ASSERT_EQ(r.push(bytes(25)).value(), 6u);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(r.push(bytes(5), Lane::priority).ok());
  order.clear();
  while (r.next()) order.push_back(write_one(r).seq);
  // 6 waits for 4 and 5 (older, not started) although the credit is spent.
  EXPECT_EQ(order, (std::vector<Seq>{1, 2, 3, 4, 5, 6, 7, 8, 9, 6, 10, 11, 12, 6}));
}

// The receiver's rules, fed by hand.
struct Rx {
  InState in{AckPolicy{}};
  Reassembler r{100, 0};
  std::vector<Seq> delivered;
  Result<Reassembler::Outcome> feed(Seq seq, Lane lane, bool more, std::size_t n = 4) {
    const Payload p = bytes(n);
    auto o = r.feed(in, seq, message_flags(lane, more), p);
    if (o && o.value() == Reassembler::Outcome::complete) {
      delivered.push_back(seq);
      in.delivered(seq, Clock::time_point{});
    }
    return o;
  }
};

TEST(Reassembler, PriorityOvertakesABulkMessageInPieces) {
  Rx rx;
  ASSERT_EQ(rx.feed(1, Lane::bulk, true).value(), Reassembler::Outcome::partial);
  ASSERT_EQ(rx.feed(2, Lane::priority, false).value(), Reassembler::Outcome::complete);
  ASSERT_EQ(rx.feed(1, Lane::bulk, true).value(), Reassembler::Outcome::partial);
  ASSERT_EQ(rx.feed(4, Lane::priority, false).value(), Reassembler::Outcome::complete);
  EXPECT_EQ(rx.in.in_seq(), 0u);  // 1 still missing
  ASSERT_EQ(rx.feed(1, Lane::bulk, false).value(), Reassembler::Outcome::complete);
  EXPECT_EQ(rx.in.in_seq(), 2u);
  EXPECT_EQ(rx.r.payload().size(), 12u);
  ASSERT_EQ(rx.feed(3, Lane::bulk, false).value(), Reassembler::Outcome::complete);
  EXPECT_EQ(rx.in.in_seq(), 4u);
  EXPECT_EQ(rx.delivered, (std::vector<Seq>{2, 4, 1, 3}));
}

TEST(Reassembler, MalformedSequencesCloseWithNamedErrors) {
  const auto frag = make_error_code(MessengerErrc::bad_fragment);
  const auto gap = make_error_code(MessengerErrc::sequence_gap);
  {
    Rx rx;  // a chunk of another number while one is in pieces
    ASSERT_TRUE(rx.feed(1, Lane::bulk, true).ok());
    EXPECT_EQ(rx.feed(2, Lane::bulk, false).error(), frag);
  }
  {
    Rx rx;  // the more-fragments flag on a number already complete
    ASSERT_TRUE(rx.feed(1, Lane::bulk, false).ok());
    EXPECT_EQ(rx.feed(1, Lane::bulk, true).error(), frag);
  }
  {
    Rx rx;  // the total over max_message_size (100)
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(rx.feed(1, Lane::bulk, true, 8).ok());
    EXPECT_EQ(rx.feed(1, Lane::bulk, true, 8).error(), frag);
  }
  {
    Rx rx;  // an unknown lane
    EXPECT_EQ(rx.r.feed(rx.in, 1, 7u << 8, {}).error(), frag);
  }
  {
    Rx rx;  // a number skipped in the only lane
    EXPECT_EQ(rx.feed(2, Lane::bulk, false).error(), gap);
  }
  {
    Rx rx;  // priority skipped 1 (bulk owes it), then bulk starts 3 first
    ASSERT_TRUE(rx.feed(2, Lane::priority, false).ok());
    EXPECT_EQ(rx.feed(3, Lane::bulk, false).error(), gap);
  }
  {
    Rx rx;  // far beyond what a window allows
    EXPECT_EQ(rx.feed(kMaxAhead + 2, Lane::priority, false).error(), gap);
  }
}

// Whole messages in number order take feed()'s short path; what it records (the lane's last
// start, the next number) must be what the full rules then check against, and a frame that
// only nearly qualifies (a duplicate, too large, numbers owed) must get the full rules.
TEST(Reassembler, ShortPathKeepsTheRulesState) {
  const auto frag = make_error_code(MessengerErrc::bad_fragment);
  const auto gap = make_error_code(MessengerErrc::sequence_gap);
  {
    Rx rx;
    ASSERT_EQ(rx.feed(1, Lane::bulk, false).value(), Reassembler::Outcome::complete);
    ASSERT_EQ(rx.feed(2, Lane::bulk, false).value(), Reassembler::Outcome::complete);
    EXPECT_EQ(rx.feed(2, Lane::bulk, true).error(), frag);  // 2 started in bulk already
  }
  {
    Rx rx;
    ASSERT_EQ(rx.feed(1, Lane::bulk, false).value(), Reassembler::Outcome::complete);
    ASSERT_EQ(rx.feed(2, Lane::bulk, false).value(), Reassembler::Outcome::complete);
    EXPECT_EQ(rx.feed(1, Lane::bulk, false).error(), gap);  // below bulk's last start
  }
  {
    Rx rx;  // priority skips 2 (owed), so 4 is not the short path's, yet complete
    ASSERT_EQ(rx.feed(1, Lane::bulk, false).value(), Reassembler::Outcome::complete);
    ASSERT_EQ(rx.feed(3, Lane::priority, false).value(), Reassembler::Outcome::complete);
    ASSERT_EQ(rx.feed(4, Lane::priority, false).value(), Reassembler::Outcome::complete);
    EXPECT_EQ(rx.feed(5, Lane::bulk, false).error(), gap);  // bulk still owes 2
    Rx ok;
    ASSERT_TRUE(ok.feed(1, Lane::bulk, false).ok());
    ASSERT_TRUE(ok.feed(3, Lane::priority, false).ok());
    ASSERT_EQ(ok.feed(2, Lane::bulk, false).value(), Reassembler::Outcome::complete);
    ASSERT_EQ(ok.feed(4, Lane::bulk, false).value(), Reassembler::Outcome::complete);
    EXPECT_EQ(ok.delivered, (std::vector<Seq>{1, 3, 2, 4}));
    EXPECT_EQ(ok.in.in_seq(), 4u);
  }
  {
    Rx rx;  // the next number, but over max_message_size (100)
    EXPECT_EQ(rx.feed(1, Lane::bulk, false, 101).error(), frag);
  }
  {
    Rx rx;  // the next number to start here, but the session delivered it already
    rx.in.delivered(1, Clock::time_point{});
    EXPECT_EQ(rx.feed(1, Lane::bulk, false).value(), Reassembler::Outcome::duplicate);
    EXPECT_TRUE(rx.delivered.empty());
  }
}

// Both ends over a lossy pipe: random lanes and sizes, chunks carried in order, the
// connection lost at random points (rewind, replay, a fresh Reassembler), acks in between.
// Every message arrives exactly once, and in order within its lane.
TEST(FlowLogic, RandomScheduleDeliversEachOnceInLaneOrder) {
  std::mt19937_64 rng(20261201);
  for (int round = 0; round < 40; ++round) {
    QueueBudget budget{10000, 1 << 24};
    // Odd rounds with a small priority credit: the bulk lane's share cuts in often.
    OutQueue q({.window_messages = 8,
                .window_bytes = 200,
                .fragment_size = 16,
                .priority_credit = round % 2 == 0 ? std::size_t{64} << 10 : 40,
                .chunk_charge = 8},
               budget);
    InState in{AckPolicy{}};
    std::optional<Reassembler> r;
    r.emplace(1000, 0);
    std::map<Seq, Lane> lane_of;
    std::vector<Seq> got[kLanes];
    std::vector<int> seen(1, 0);
    const int total = 200;
    int pushed = 0;
    for (int step = 0; step < 100000 && (pushed < total || q.size() > 0); ++step) {
      const auto dice = rng() % 100;
      if (pushed < total && dice < 20) {
        const Lane lane = rng() % 3 == 0 ? Lane::priority : Lane::bulk;
        auto s = q.push(bytes(rng() % 60), lane);
        ASSERT_TRUE(s.ok());
        lane_of[s.value()] = lane;
        seen.push_back(0);
        ++pushed;
      } else if (dice >= 20 && dice < 22) {  // the connection is lost
        q.rewind();
        ASSERT_TRUE(q.ack(in.in_seq()).ok());  // the welcome's msg_seq
        r.emplace(1000, in.in_seq());
      } else if (dice >= 22 && dice < 35) {
        ASSERT_TRUE(q.ack(in.in_seq()).ok());
      } else if (auto c = q.next()) {
        const Payload copy(c->bytes.begin(), c->bytes.end());
        const Seq seq = c->seq;
        const auto flags = message_flags(c->lane, c->more);
        q.mark_written();
        auto o = r->feed(in, seq, flags, copy);
        ASSERT_TRUE(o.ok()) << o.error().message() << " seq " << seq;
        if (o.value() == Reassembler::Outcome::complete) {
          in.delivered(seq, Clock::time_point{});
          ++seen[seq];
          got[static_cast<std::size_t>(lane_of[seq])].push_back(seq);
        }
      }
    }
    ASSERT_EQ(q.size(), 0u) << "round " << round << " in_seq " << in.in_seq() << " acked "
                            << q.acked() << " inflight " << q.in_flight() << " next "
                            << q.next().has_value() << " pushed " << pushed;
    for (int s = 1; s <= total; ++s) ASSERT_EQ(seen[s], 1) << "seq " << s;
    for (const auto& lane : got) {
      for (std::size_t i = 1; i < lane.size(); ++i) ASSERT_LT(lane[i - 1], lane[i]);
    }
  }
}

}  // namespace
}  // namespace rmsg::session
