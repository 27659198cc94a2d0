// InState: the receiving half of a session. Pure logic (no I/O; time is passed in).
//
// Delivery: a message is delivered when its sequence number is the next one (in_seq + 1);
// one at or before in_seq is a duplicate (a replay of something already delivered) and is
// dropped; one further ahead is a gap, which a correct peer never produces (the stream is
// ordered and replays start at our in_seq + 1): the connection is broken and closes with
// Errc::protocol_error.
//
// The ack point is "handed to the application's dispatch callback": the driver calls
// delivered() after the callback returned, and only then can the sequence number be
// acknowledged, so a message acknowledged is a message the application has seen.
//
// Acks: every frame we send carries in_seq (note_ack_sent() then). A standalone ACK frame
// is due when `every` messages were delivered since the last ack went out, or `delay` after
// the first of them if nothing carried an ack meanwhile ("T of quiet").
//
// Threading: none (the messenger's loop thread owns it).
#pragma once

#include <cstdint>

#include "msg/seq.h"
#include "rmsg/loop_time.h"

namespace rmsg::msg {

struct AckPolicy {
  std::uint32_t every = 32;                       // standalone ack after this many deliveries
  Duration delay = std::chrono::milliseconds(5);  // or this long after the first unacked one
};

class InState {
 public:
  enum class Verdict { deliver, duplicate, gap };

  explicit InState(const AckPolicy& policy) noexcept : policy_(policy) {}

  Verdict check(Seq seq) const noexcept {
    if (seq == in_seq_ + 1) return Verdict::deliver;
    return seq_at_or_before(seq, in_seq_) ? Verdict::duplicate : Verdict::gap;
  }
  // The message `in_seq() + 1` was handed to the dispatch callback (which returned).
  // Returns true when a standalone ack is due at once (`every` reached).
  bool delivered(Clock::time_point now) noexcept {
    ++in_seq_;
    if (unacked_ == 0) first_unacked_at_ = now;
    ++unacked_;
    return unacked_ >= policy_.every;
  }
  // A frame carrying in_seq() was written.
  void note_ack_sent() noexcept { unacked_ = 0; }
  // Whether delivered messages wait for an ack, and from when a standalone one is due.
  bool ack_pending() const noexcept { return unacked_ != 0; }
  Clock::time_point ack_deadline() const noexcept { return first_unacked_at_ + policy_.delay; }

  Seq in_seq() const noexcept { return in_seq_; }

 private:
  AckPolicy policy_;
  Seq in_seq_ = 0;
  std::uint32_t unacked_ = 0;
  Clock::time_point first_unacked_at_{};
};

}  // namespace rmsg::msg
