#include "session/out_queue.h"

#include <gtest/gtest.h>

#include <limits>

namespace rmsg::session {
namespace {

Payload bytes(std::size_t n, int v = 1) {
  return Payload(n, static_cast<std::byte>(v));
}

// Writes everything the window admits; returns how many.
int write_all(OutQueue& q) {
  int n = 0;
  while (q.next().has_value()) {
    q.mark_written();
    ++n;
  }
  return n;
}

TEST(OutQueue, SequenceNumbersStartAtOneAndStayOnReplay) {
  QueueBudget budget{100, 1000};
  OutQueue q({}, budget);
  ASSERT_EQ(q.push(bytes(1)).value(), 1u);
  ASSERT_EQ(q.push(bytes(1)).value(), 2u);
  ASSERT_EQ(q.push(bytes(1)).value(), 3u);
  ASSERT_EQ(q.next()->seq, 1u);
  q.mark_written();
  q.mark_written();
  EXPECT_EQ(q.highest_written(), 2u);
  EXPECT_EQ(q.in_flight(), 2u);
  q.rewind();  // connection lost: replay from the front, same numbers
  EXPECT_EQ(q.in_flight(), 0u);
  ASSERT_EQ(q.next()->seq, 1u);
  ASSERT_TRUE(q.ack(1).ok());  // the peer had 1 (reconnect's msg_seq)
  ASSERT_EQ(q.next()->seq, 2u);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(budget.messages(), 2u);
}

// all_written() (pump's cheap "nothing left" test) holds exactly when every queued message
// went out whole on this connection, and whenever it holds next() has nothing.
TEST(OutQueue, AllWrittenMeansNextHasNothing) {
  QueueBudget budget{100, 1 << 20};
  QueueLimits limits;
  limits.fragment_size = 10;
  OutQueue q(limits, budget);
  EXPECT_TRUE(q.all_written());  // empty
  ASSERT_TRUE(q.push(bytes(5)).ok());
  EXPECT_FALSE(q.all_written());
  q.mark_written();
  EXPECT_TRUE(q.all_written());
  EXPECT_FALSE(q.next().has_value());
  ASSERT_TRUE(q.push(bytes(25), Lane::bulk).ok());  // three chunks
  q.mark_written();
  EXPECT_FALSE(q.all_written());  // started, partly written
  EXPECT_TRUE(q.next().has_value());
  EXPECT_EQ(write_all(q), 2);
  EXPECT_TRUE(q.all_written());
  q.rewind();  // a new connection: everything goes again
  EXPECT_FALSE(q.all_written());
  EXPECT_EQ(write_all(q), 4);
  EXPECT_TRUE(q.all_written());
  ASSERT_TRUE(q.ack(2).ok());
  EXPECT_TRUE(q.all_written());
  EXPECT_EQ(q.size(), 0u);
}

TEST(OutQueue, AckDropsFrontAndRejectsTheFuture) {
  QueueBudget budget{100, 1000};
  OutQueue q({}, budget);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q.push(bytes(10)).ok());
  EXPECT_EQ(write_all(q), 5);
  EXPECT_TRUE(q.ack(0).ok());  // nothing yet: no change
  EXPECT_EQ(q.size(), 5u);
  EXPECT_TRUE(q.ack(3).ok());
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.in_flight(), 2u);
  EXPECT_EQ(q.acked(), 3u);
  EXPECT_EQ(budget.bytes(), 20u);
  EXPECT_TRUE(q.ack(2).ok());  // older: no change
  EXPECT_EQ(q.size(), 2u);
  EXPECT_TRUE(q.ack(6).is(Errc::protocol_error));  // 6 was never written
  EXPECT_TRUE(q.ack(5).ok());
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(budget.messages(), 0u);
}

TEST(OutQueue, SessionAndMessengerBoundsRefuse) {
  QueueBudget budget{3, 1000};
  QueueLimits limits{.max_messages = 2, .max_bytes = 100};
  OutQueue a(limits, budget);
  OutQueue b(limits, budget);
  EXPECT_TRUE(a.push(bytes(10)).ok());
  EXPECT_TRUE(a.push(bytes(10)).ok());
  EXPECT_TRUE(a.push(bytes(10)).is(Errc::resource_exhausted));  // session count
  EXPECT_TRUE(b.push(bytes(10)).ok());
  EXPECT_TRUE(b.push(bytes(10)).is(Errc::resource_exhausted));  // messenger count
  EXPECT_EQ(budget.messages(), 3u);
  OutQueue c({.max_messages = 10, .max_bytes = 15}, budget);
  EXPECT_TRUE(c.push(bytes(16)).is(Errc::resource_exhausted));  // session bytes
  EXPECT_EQ(c.size(), 0u);
}

TEST(OutQueue, MessengerByteBoundRefusesAndDestructorReturnsShare) {
  QueueBudget budget{100, 25};
  {
    OutQueue a({}, budget);
    EXPECT_TRUE(a.push(bytes(20)).ok());
    EXPECT_TRUE(a.push(bytes(6)).is(Errc::resource_exhausted));
    EXPECT_TRUE(a.push(bytes(5)).ok());
    EXPECT_EQ(budget.bytes(), 25u);
  }
  EXPECT_EQ(budget.bytes(), 0u);
  EXPECT_EQ(budget.messages(), 0u);
  OutQueue huge({.max_bytes = std::numeric_limits<std::size_t>::max()}, budget);
  EXPECT_TRUE(huge.push(bytes(26)).is(Errc::resource_exhausted));
}

TEST(QueueBudget, MessagesAndBytesShareOneWord) {
  constexpr std::size_t kHalf = std::size_t{1} << 29;
  QueueBudget b{3, 2 * kHalf};
  EXPECT_TRUE(b.try_reserve(kHalf));
  EXPECT_TRUE(b.try_reserve(0));
  EXPECT_EQ(b.messages(), 2u);
  EXPECT_EQ(b.bytes(), kHalf);
  EXPECT_FALSE(b.try_reserve(kHalf + 1));  // bytes: refused, and nothing taken
  EXPECT_EQ(b.messages(), 2u);
  EXPECT_EQ(b.bytes(), kHalf);
  EXPECT_TRUE(b.try_reserve(kHalf));  // exactly at the byte bound
  EXPECT_FALSE(b.try_reserve(0));     // the count
  EXPECT_EQ(b.messages(), 3u);
  EXPECT_EQ(b.bytes(), 2 * kHalf);
  EXPECT_FALSE(b.below_half());
  b.release(2, 2 * kHalf);  // one read-modify-write for both
  EXPECT_EQ(b.messages(), 1u);
  EXPECT_EQ(b.bytes(), 0u);
  EXPECT_TRUE(b.below_half());
}

TEST(QueueBudget, BoundsAboveTheWordActAsItsLimits) {
  QueueBudget b{std::numeric_limits<std::size_t>::max(), std::numeric_limits<std::size_t>::max()};
  EXPECT_EQ(b.max_messages, QueueBudget::kMaxMessages);
  EXPECT_EQ(b.max_bytes, QueueBudget::kMaxBytes);
  EXPECT_FALSE(b.try_reserve(QueueBudget::kMaxBytes + 1));
  EXPECT_TRUE(b.try_reserve(QueueBudget::kMaxBytes));
  EXPECT_FALSE(b.try_reserve(1));
  EXPECT_EQ(b.messages(), 1u);
  EXPECT_EQ(b.bytes(), QueueBudget::kMaxBytes);
  b.release(1, QueueBudget::kMaxBytes);
  EXPECT_EQ(b.used.load(), 0u);
}

TEST(PayloadPool, KeepsSmallBuffersUpToItsBound) {
  PayloadPool pool;
  EXPECT_EQ(pool.take().capacity(), 0u);  // nothing kept yet
  std::vector<std::byte> b(100);
  const std::byte* storage = b.data();
  pool.give(std::move(b));
  EXPECT_EQ(pool.size(), 1u);
  const auto t = pool.take();
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.data(), storage);  // the same storage, emptied
  EXPECT_GE(t.capacity(), 100u);
  EXPECT_EQ(pool.size(), 0u);
  std::vector<std::byte> big(PayloadPool::kMaxCapacity + 1);
  pool.give(std::move(big));
  EXPECT_EQ(pool.size(), 0u);  // too large: left to its owner
  EXPECT_EQ(big.size(), PayloadPool::kMaxCapacity + 1);
  pool.give(std::vector<std::byte>{});
  EXPECT_EQ(pool.size(), 0u);  // no storage: nothing to keep
  for (std::size_t i = 0; i < PayloadPool::kMaxBuffers + 4; ++i) {
    pool.give(std::vector<std::byte>(8));
  }
  EXPECT_EQ(pool.size(), PayloadPool::kMaxBuffers);
}

TEST(OutQueue, AcknowledgedPayloadsGoToThePool) {
  QueueBudget budget{100, 1000};
  PayloadPool pool;
  OutQueue q({}, budget, nullptr, &pool);
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(q.push(bytes(10, i)).ok());
  EXPECT_EQ(write_all(q), 4);
  ASSERT_TRUE(q.ack(2).ok());
  EXPECT_EQ(pool.size(), 2u);
  auto h = q.take_all();  // handed back to the application, not kept
  EXPECT_EQ(h.unknown.size(), 2u);
  EXPECT_EQ(h.unknown[0][0], std::byte{3});
  EXPECT_EQ(pool.size(), 2u);
}

TEST(OutQueue, WindowLimitsInFlightButAdmitsOneLargeMessage) {
  QueueBudget budget{100, 1 << 20};
  OutQueue q({.window_messages = 2, .window_bytes = 100}, budget);
  ASSERT_TRUE(q.push(bytes(500)).ok());  // larger than the window: goes alone
  ASSERT_TRUE(q.push(bytes(10)).ok());
  ASSERT_TRUE(q.push(bytes(10)).ok());
  ASSERT_TRUE(q.push(bytes(10)).ok());
  EXPECT_EQ(write_all(q), 1);
  ASSERT_TRUE(q.ack(1).ok());
  EXPECT_EQ(write_all(q), 2);  // window_messages
  ASSERT_TRUE(q.ack(2).ok());
  EXPECT_EQ(write_all(q), 1);
  EXPECT_FALSE(q.next().has_value());
}

TEST(OutQueue, TakeAllSeparatesUnknownFromUnsent) {
  QueueBudget budget{100, 1000};
  OutQueue q({}, budget);
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(q.push(bytes(1, i)).ok());
  q.mark_written();
  q.mark_written();
  q.mark_written();
  ASSERT_TRUE(q.ack(1).ok());
  q.rewind();  // 2 and 3 written once, then the connection went
  auto h = q.take_all();
  ASSERT_EQ(h.unknown.size(), 2u);
  ASSERT_EQ(h.unsent.size(), 2u);
  EXPECT_EQ(h.unknown[0][0], std::byte{2});
  EXPECT_EQ(h.unknown[1][0], std::byte{3});
  EXPECT_EQ(h.unsent[0][0], std::byte{4});
  EXPECT_EQ(h.unsent[1][0], std::byte{5});
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(budget.messages(), 0u);
  EXPECT_EQ(budget.bytes(), 0u);
}

TEST(Seq, ComparisonIsWrapSafe) {
  const Seq max = std::numeric_limits<Seq>::max();
  EXPECT_TRUE(seq_after(1, 0));
  EXPECT_TRUE(seq_after(0, max));  // 0 follows 2^64-1
  EXPECT_TRUE(seq_after(5, max - 5));
  EXPECT_FALSE(seq_after(max, 2));
  EXPECT_TRUE(seq_at_or_before(max, max));
  EXPECT_EQ(seq_max(max, 3), 3u);
  EXPECT_EQ(seq_max(7, 3), 7u);
}

}  // namespace
}  // namespace rmsg::session
