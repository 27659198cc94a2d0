// InState: the receiving half of a session. Pure logic (no I/O; time is passed in).
//
// Delivery: in_seq is the last number up to which every message was delivered. Lanes
// (docs/messenger.md, Flow control) let a priority message overtake a bulk one still
// arriving, so a message above in_seq + 1 may be delivered first: it is remembered in
// `ahead` (at most kMaxAhead numbers past in_seq) until the ones before it arrive, and
// in_seq then moves past all of them. A message at or before in_seq, or one in `ahead`, is
// a duplicate (a replay of something already delivered) and is dropped. Which arrival
// orders are legal is the Reassembler's business (src/msg/reassembly.h); check() is the
// single-lane rule (next or duplicate or gap).
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
#include <deque>

#include "rmsg/loop_time.h"
#include "session/vocabulary.h"
#include "wire/seq.h"

namespace rmsg::session {

// How far past in_seq a message may be delivered ahead of the ones before it; further is
// a gap (a correct peer's window keeps it far below).
inline constexpr Seq kMaxAhead = 65536;

struct AckPolicy {
  std::uint32_t every = 32;                       // standalone ack after this many deliveries
  Duration delay = std::chrono::milliseconds(5);  // or this long after the first unacked one
};

class InState {
 public:
  enum class Verdict { deliver, duplicate, gap };

  explicit InState(const AckPolicy& policy) noexcept : policy_(policy) {}

  Verdict check(Seq seq) const noexcept {
    if (is_duplicate(seq)) return Verdict::duplicate;
    return seq == in_seq_ + 1 ? Verdict::deliver : Verdict::gap;
  }
  bool is_duplicate(Seq seq) const noexcept {
    if (seq_at_or_before(seq, in_seq_)) return true;
    const Seq off = seq - in_seq_ - 1;
    return off < ahead_.size() && ahead_[static_cast<std::size_t>(off)];
  }
  // Whether `seq` (not a duplicate) is close enough to in_seq to be delivered ahead.
  bool within_reach(Seq seq) const noexcept { return seq - in_seq_ <= kMaxAhead; }
  // The message `seq` (not a duplicate, within reach) was handed to the dispatch callback
  // (which returned). Returns true when a standalone ack is due at once (`every` reached).
  bool delivered(Seq seq, Clock::time_point now) {
    if (seq == in_seq_ + 1 && ahead_.empty()) {
      ++in_seq_;  // in order, nothing ahead (the usual case): no deque work
    } else {
      const auto off = static_cast<std::size_t>(seq - in_seq_ - 1);
      if (off >= ahead_.size()) ahead_.resize(off + 1, false);
      ahead_[off] = true;
      while (!ahead_.empty() && ahead_.front()) {
        ahead_.pop_front();
        ++in_seq_;
      }
    }
    if (unacked_ == 0) first_unacked_at_ = now;
    ++unacked_;
    return unacked_ >= policy_.every;
  }
  bool delivered(Clock::time_point now) { return delivered(in_seq_ + 1, now); }
  // A frame carrying in_seq() was written.
  void note_ack_sent() noexcept { unacked_ = 0; }
  // Whether delivered messages wait for an ack, and from when a standalone one is due.
  bool ack_pending() const noexcept { return unacked_ != 0; }
  Clock::time_point ack_deadline() const noexcept { return first_unacked_at_ + policy_.delay; }

  Seq in_seq() const noexcept { return in_seq_; }

 private:
  AckPolicy policy_;
  Seq in_seq_ = 0;
  std::deque<bool> ahead_;  // [i]: in_seq + 1 + i was delivered
  std::uint32_t unacked_ = 0;
  Clock::time_point first_unacked_at_{};
};

}  // namespace rmsg::session
