// Flow control over loopback streams with a manual clock (docs/messenger.md, Flow
// control): refusals end with one writable event, a large message goes in chunks that a
// priority message passes, fragments survive faults.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "msg/messenger_loopback_fixture.h"

namespace rmsg::testing {
namespace {

using std::chrono::milliseconds;
using Kind = SessionEvent::Kind;
using Lane = Messenger::Lane;

const std::error_code kReset = make_error_code(Errc::connection_reset);

#define RUN_UNTIL_EVENTS(side, kind, n) \
  ASSERT_TRUE(run([&] { return (side).node.count(kind) >= (n); }))

class MessengerFlowTest : public MessengerLoopbackTest {
 protected:
  struct Arrival {
    std::uint64_t index;
    std::size_t size;
  };
  // B records what it gets (index and size), in arrival order; checks every byte.
  void start_recording_b(MessengerOptions o) {
    auto m = MessengerAccess::create(
        *loop_, o, std::make_unique<LoopbackStreams>(*loop_, b_.connect, b_.accept),
        [this](NodeId, std::span<const std::byte> p) {
          const std::uint64_t idx = index_of(p);
          if (numbered(idx, p.size()) != std::vector<std::byte>(p.begin(), p.end())) ++corrupt_;
          arrivals_.push_back({idx, p.size()});
        },
        [this](SessionEvent e) { b_.node.on_event(std::move(e)); });
    ASSERT_TRUE(m.ok());
    b_.node.m = std::move(m).value();
    ASSERT_TRUE(b_.node.m->listen(loopback_params(kPortB).peer, loopback_params(kPortB)).ok());
  }
  Result<void> send(std::uint64_t index, std::size_t len, Lane lane) {
    return a_.node.m->send(kB, numbered(index, len), Messenger::SendOptions{lane});
  }
  std::vector<std::uint64_t> order() const {
    std::vector<std::uint64_t> v;
    for (const auto& a : arrivals_) v.push_back(a.index);
    return v;
  }

  std::vector<Arrival> arrivals_;
  int corrupt_ = 0;
};

TEST_F(MessengerFlowTest, RefusedSendGetsExactlyOneWritableEvent) {
  MessengerOptions oa = options(kA);
  oa.session_max_messages = 8;
  start_a(oa);
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  send_a(8);  // B is not there yet: all 8 wait
  loop_->run_for([] { return false; }, milliseconds(50));
  EXPECT_EQ(a_.node.count(Kind::writable), 0);  // full, but nothing refused yet
  EXPECT_TRUE(a_.node.send_next(kB).is(Errc::resource_exhausted));
  EXPECT_TRUE(a_.node.send_next(kB).is(Errc::resource_exhausted));  // the same episode
  start_b(options(kB));
  RUN_UNTIL_EVENTS(a_, Kind::writable, 1);
  EXPECT_EQ(a_.node.events.back().peer, kB);
  EXPECT_LE(a_.node.m->session_info(kB)->queued, 4u);  // at or below half
  ASSERT_TRUE(a_.node.send_next(kB).ok());
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  loop_->run_for([] { return false; }, milliseconds(100));
  EXPECT_EQ(a_.node.count(Kind::writable), 1);  // drained completely: still one
  expect_clean();
  // A second episode (B's acks stall) gets its own event once the acks flow again (the
  // stalled connection times out and the next one replays).
  b_.accept->delay(std::chrono::hours(1));
  send_a(8);
  EXPECT_TRUE(a_.node.send_next(kB).is(Errc::resource_exhausted));
  loop_->run_for([] { return false; }, milliseconds(100));
  EXPECT_EQ(a_.node.count(Kind::writable), 1);
  b_.accept->delay(Duration::zero());
  RUN_UNTIL_EVENTS(a_, Kind::writable, 2);
  ASSERT_TRUE(run([&] { return b_has_all_from_a(); }));
  expect_clean();
}

// Room in the messenger-wide budget that comes without an ack (mark_down drops a session's
// queue) ends the episodes that waited for it: a peer refused because of the total hears
// writable although nothing of its own is ever acknowledged.
TEST_F(MessengerFlowTest, RoomFromADroppedSessionEndsOtherPeersEpisodes) {
  MessengerOptions oa = options(kA);
  oa.total_max_messages = 8;
  start_a(oa);
  send_a(8);  // B has no address: they wait
  constexpr NodeId kC = 3;
  EXPECT_EQ(a_.node.m->send(kC, numbered(1)).error(), make_error_code(Errc::resource_exhausted));
  loop_->run_for([] { return false; }, milliseconds(50));
  EXPECT_EQ(a_.node.count(Kind::writable), 0);
  a_.node.m->mark_down(kB);
  RUN_UNTIL_EVENTS(a_, Kind::writable, 1);
  EXPECT_EQ(a_.node.events.back().peer, kC);
  EXPECT_TRUE(a_.node.m->send(kC, numbered(1)).ok());
}

TEST_F(MessengerFlowTest, PriorityMessagePassesALargeOneInChunks) {
  MessengerOptions oa = options(kA);
  oa.fragment_size = 64 << 10;
  start_a(oa);
  start_recording_b(options(kB));
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  ASSERT_TRUE(send(1, 4 << 20, Lane::bulk).ok());
  ASSERT_TRUE(send(2, 64, Lane::bulk).ok());
  // Once a few chunks of 1 went out, a priority message overtakes the rest of it.
  ASSERT_TRUE(run([&] { return a_.node.counter("msg.fragments") >= 4; }));
  ASSERT_TRUE(send(3, 64, Lane::priority).ok());
  ASSERT_TRUE(run([&] { return arrivals_.size() == 3; }));
  EXPECT_EQ(order(), (std::vector<std::uint64_t>{3, 1, 2}));  // bulk keeps its order
  EXPECT_EQ(arrivals_[1].size, std::size_t{4} << 20);
  EXPECT_EQ(corrupt_, 0);
  EXPECT_EQ(a_.node.counter("msg.fragments"), 64u);  // 4 MiB / 64 KiB chunks
  ASSERT_TRUE(run([&] { return a_.node.m->session_info(kB)->queued == 0; }));
}

// A priority lane that never empties (3,000 small messages queued behind a 1 MiB bulk
// one, the window wide enough for all) leaves bulk its share: with the default credit one
// 64 KiB chunk goes per 16 small messages, so the bulk message arrives after about
// 16 x 16 of them, not after all 3,000.
TEST_F(MessengerFlowTest, APriorityLaneThatNeverEmptiesLeavesBulkItsShare) {
  MessengerOptions oa = options(kA);
  oa.session_max_messages = 8192;
  oa.window_messages = 8192;
  start_a(oa);
  start_recording_b(options(kB));
  constexpr std::uint64_t kSmall = 3000;
  ASSERT_TRUE(send(1, 1 << 20, Lane::bulk).ok());
  for (std::uint64_t i = 2; i <= kSmall + 1; ++i) ASSERT_TRUE(send(i, 64, Lane::priority).ok());
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  ASSERT_TRUE(run([&] { return arrivals_.size() == kSmall + 1; }));
  std::size_t before = 0;  // priority messages delivered before the bulk one
  while (before < arrivals_.size() && arrivals_[before].index != 1) ++before;
  ASSERT_LT(before, arrivals_.size());
  EXPECT_EQ(arrivals_[before].size, std::size_t{1} << 20);
  EXPECT_GE(before, 200u);  // still mostly priority: the lanes keep their point
  EXPECT_LE(before, 16u * 17u);
  for (std::size_t i = 0; i < arrivals_.size(); ++i) {
    if (i == before) continue;
    ASSERT_EQ(arrivals_[i].index, i < before ? i + 2 : i + 1);
  }
  EXPECT_EQ(corrupt_, 0);
}

TEST_F(MessengerFlowTest, FaultsInsideFragmentedMessagesLoseNothing) {
  MessengerOptions oa = options(kA);
  oa.fragment_size = 1000;
  start_a(oa);
  start_recording_b(options(kB));
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());
  std::vector<std::uint64_t> bulk;
  std::vector<std::uint64_t> prio;
  for (std::uint64_t i = 1; i <= 60; ++i) {
    const bool p = i % 3 == 0;
    ASSERT_TRUE(send(i, p ? 100 : 2500 + i * 37, p ? Lane::priority : Lane::bulk).ok());
    (p ? prio : bulk).push_back(i);
  }
  // Connections die in the middle of messages (after 20, 35 and 50 KB from A).
  a_.connect->fail_write(kReset, 20000);
  ASSERT_TRUE(run([&] { return a_.node.count(Kind::disconnected) >= 1; }));
  a_.connect->fail_write(kReset, 15000);
  ASSERT_TRUE(run([&] { return a_.node.count(Kind::disconnected) >= 2; }));
  a_.connect->fail_write(kReset, 15000);
  ASSERT_TRUE(run([&] { return a_.node.m->session_info(kB)->queued == 0; }));
  EXPECT_GE(a_.node.count(Kind::disconnected), 3);
  std::vector<std::uint64_t> got_bulk;
  std::vector<std::uint64_t> got_prio;
  for (const auto& a : arrivals_) (a.index % 3 == 0 ? got_prio : got_bulk).push_back(a.index);
  EXPECT_EQ(got_bulk, bulk);  // each once, in order within its lane
  EXPECT_EQ(got_prio, prio);
  EXPECT_EQ(corrupt_, 0);
  EXPECT_GT(a_.node.counter("msg.replayed"), 0u);
}

TEST_F(MessengerFlowTest, ShutdownDrainsEveryQueueThenCloses) {
  start_both();
  send_a(200, 3000);
  bool finished = false;
  const auto t0 = loop_->now();
  a_.node.m->shutdown(t0 + std::chrono::seconds(5), [&] { finished = true; });
  EXPECT_FALSE(finished);                               // never inside the call
  EXPECT_TRUE(a_.node.send_next(kB).is(Errc::closed));  // refused from now on
  ASSERT_TRUE(run([&] { return finished; }));
  EXPECT_LT(loop_->now() - t0, std::chrono::seconds(5));  // drained, not timed out
  EXPECT_EQ(b_.node.ledger.last[kA], 200u);               // everything arrived
  expect_clean();
  RUN_UNTIL_EVENTS(b_, Kind::disconnected, 1);
  EXPECT_EQ(b_.node.events.back().error, make_error_code(MessengerErrc::peer_closed));
  EXPECT_EQ(b_.node.count(Kind::reset), 0);
}

TEST_F(MessengerFlowTest, ShutdownGivesUpAtTheDeadline) {
  start_a(options(kA));
  ASSERT_TRUE(a_.node.m->add_peer(kB, loopback_params(kPortB)).ok());  // B never starts
  send_a(5);
  bool finished = false;
  const auto t0 = loop_->now();
  a_.node.m->shutdown(t0 + milliseconds(300), [&] { finished = true; });
  ASSERT_TRUE(run([&] { return finished; }));
  EXPECT_GE(loop_->now() - t0, milliseconds(300));
  EXPECT_FALSE(a_.node.m->session_info(kB).has_value());  // sessions dropped
}

}  // namespace
}  // namespace rmsg::testing
