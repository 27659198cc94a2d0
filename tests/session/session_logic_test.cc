// InState (dedupe, gaps, ack timing), Backoff, and the handshake/session payload codecs.
#include <gtest/gtest.h>

#include <limits>

#include "session/backoff.h"
#include "session/in_state.h"
#include "wire/session_frames.h"

namespace rmsg::session {
namespace {

using std::chrono::milliseconds;

TEST(InState, DeliversInOrderDropsDuplicatesFlagsGaps) {
  InState in({.every = 100, .delay = milliseconds(5)});
  const Clock::time_point t0{std::chrono::hours(1)};
  EXPECT_EQ(in.check(1), InState::Verdict::deliver);
  EXPECT_EQ(in.check(2), InState::Verdict::gap);
  EXPECT_FALSE(in.delivered(t0));
  EXPECT_EQ(in.in_seq(), 1u);
  EXPECT_EQ(in.check(1), InState::Verdict::duplicate);
  EXPECT_EQ(in.check(0), InState::Verdict::duplicate);
  EXPECT_EQ(in.check(2), InState::Verdict::deliver);
  EXPECT_EQ(in.check(std::numeric_limits<Seq>::max()), InState::Verdict::duplicate);
}

TEST(InState, StandaloneAckAfterEveryOrAfterDelay) {
  InState in({.every = 3, .delay = milliseconds(5)});
  const Clock::time_point t0{std::chrono::hours(1)};
  EXPECT_FALSE(in.ack_pending());
  EXPECT_FALSE(in.delivered(t0));
  EXPECT_TRUE(in.ack_pending());
  EXPECT_EQ(in.ack_deadline(), t0 + milliseconds(5));
  EXPECT_FALSE(in.delivered(t0 + milliseconds(1)));
  EXPECT_EQ(in.ack_deadline(), t0 + milliseconds(5));  // from the first unacked one
  EXPECT_TRUE(in.delivered(t0 + milliseconds(2)));     // the third: due now
  in.note_ack_sent();
  EXPECT_FALSE(in.ack_pending());
  EXPECT_FALSE(in.delivered(t0 + milliseconds(9)));
  EXPECT_EQ(in.ack_deadline(), t0 + milliseconds(14));
}

TEST(Backoff, ExponentialJitteredCappedAndSeeded) {
  BackoffPolicy policy{milliseconds(10), milliseconds(100)};
  Backoff a(policy);
  Backoff b(policy);
  Random ra(42);
  Random rb(42);
  Duration base = milliseconds(10);
  for (int i = 0; i < 8; ++i) {
    const Duration d = a.next(ra);
    EXPECT_EQ(d, b.next(rb)) << "same seed, same delays";
    EXPECT_GE(d, base / 2);
    EXPECT_LE(d, base);
    base = std::min<Duration>(base * 2, milliseconds(100));
  }
  EXPECT_EQ(a.failures(), 8u);
  a.reset();
  EXPECT_LE(a.next(ra), milliseconds(10));
  const Duration w = a.longest(ra);
  EXPECT_GE(w, milliseconds(50));
  EXPECT_LE(w, milliseconds(100));
}

TEST(SessionFrames, RoundTripsAndLittleEndianLayout) {
  Hello h{1, 2, 3, 4, 5, 6, 7, kFlagLossy};
  auto e = encode(h);
  EXPECT_EQ(e[0], std::byte{1});
  EXPECT_EQ(e[8], std::byte{2});
  EXPECT_EQ(e[56], std::byte{1});  // flags
  auto d = decode_hello(e);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node, 1u);
  EXPECT_EQ(d->target, 2u);
  EXPECT_EQ(d->client_cookie, 3u);
  EXPECT_EQ(d->server_cookie, 4u);
  EXPECT_EQ(d->global_seq, 5u);
  EXPECT_EQ(d->connect_seq, 6u);
  EXPECT_EQ(d->msg_seq, 7u);
  EXPECT_EQ(d->flags, kFlagLossy);

  Welcome w{0x0102030405060708, 9, 10, 11, 0};
  auto ew = encode(w);
  EXPECT_EQ(ew[0], std::byte{8});  // least significant byte first
  EXPECT_EQ(ew[7], std::byte{1});
  auto dw = decode_welcome(ew);
  ASSERT_TRUE(dw.ok());
  EXPECT_EQ(dw->node, w.node);
  EXPECT_EQ(dw->msg_seq, 11u);

  auto m = decode_message_header(encode(MessageHeader{~0ull, 3, 0}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->seq, ~0ull);
  EXPECT_EQ(m->ack, 3u);
  EXPECT_EQ(decode_value64(encode(Value64{77}))->value, 77u);
  EXPECT_EQ(decode_reason(encode(Reason{CloseReason::wrong_node}))->reason,
            CloseReason::wrong_node);
}

TEST(SessionFrames, ShortPayloadsAreProtocolErrorsLongerOnesAccepted) {
  auto e = encode(Hello{});
  EXPECT_TRUE(decode_hello(std::span(e).first(Hello::kSize - 1)).is(Errc::protocol_error));
  EXPECT_TRUE(decode_welcome({}).is(Errc::protocol_error));
  EXPECT_TRUE(decode_value64(std::span(e).first(7)).is(Errc::protocol_error));
  EXPECT_TRUE(decode_reason(std::span(e).first(3)).is(Errc::protocol_error));
  EXPECT_TRUE(decode_message_header(std::span(e).first(23)).is(Errc::protocol_error));
  EXPECT_TRUE(decode_value64(e).ok());  // a longer payload: the tail is a later version's
}

}  // namespace
}  // namespace rmsg::session
