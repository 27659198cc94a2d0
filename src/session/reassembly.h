// Reassembler: one connection's incoming message frames, put back together into messages
// (docs/protocol.md, Messenger: fragments). Pure logic (no I/O); the session's InState
// says what was already delivered.
//
// The sender's rules, checked here: each lane has at most one message in pieces, and its
// chunks are consecutive frames of that lane carrying the same number, all but the last
// with the more-fragments flag; within a lane messages start in increasing number order
// (duplicates included: the same number again is bad_fragment); across lanes every number
// from in_seq + 1 on starts exactly once. The sender starts a priority message before any
// bulk message numbered after it, so only the priority lane skips numbers: the bulk lane
// owes them and must start them, in order, before any later one of its own. A
// number already delivered (a duplicate) may start anywhere and its chunks are dropped
// unbuffered; a duplicate left in pieces is dropped when its lane starts another message
// (the sender stops sending a message the peer acknowledged). Violations close the
// connection: MessengerErrc::bad_fragment (a chunk of another number while a message is in
// pieces, an unknown lane, the total over max_message_size, checked before anything is
// appended) or MessengerErrc::sequence_gap (a number out of order, or too far ahead).
//
// Threading: none (the messenger's loop thread owns it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "rmsg/result.h"
#include "session/in_state.h"
#include "session/out_queue.h"

namespace rmsg::session {

// The message header's flags (docs/protocol.md): bit 0 more fragments follow, bits 8..15
// the lane.
inline constexpr std::uint32_t kFlagMoreFragments = 1u << 0;
constexpr std::uint32_t message_flags(Lane lane, bool more) noexcept {
  return (static_cast<std::uint32_t>(lane) << 8) | (more ? kFlagMoreFragments : 0u);
}

class Reassembler {
 public:
  enum class Outcome : std::uint8_t {
    partial,    // more chunks to come
    complete,   // a whole new message: payload() until the next feed()
    duplicate,  // a whole message already delivered: drop it
  };

  // `in_seq`: the session's in_seq when the connection opened.
  Reassembler(std::size_t max_message_size, Seq in_seq) noexcept
      : max_size_(max_message_size), next_new_(in_seq + 1) {}

  // One message frame: number, header flags, the frame's payload segment.
  Result<Outcome> feed(const InState& in, Seq seq, std::uint32_t flags,
                       std::span<const std::byte> bytes) {
    // The usual frame, inline: a whole message (no more-fragments flag, a known lane), the
    // next number to start, with nothing in pieces in its lane and no number owed. Every
    // rule of feed_slow() passes for it (its number is above every lane's last start, not
    // a duplicate, and skips none), so only their effects remain.
    const std::size_t lane = flags >> 8;  // bits 8..15 (a known lane: no other bit set)
    if ((flags & kFlagMoreFragments) == 0 && lane < kLanes && partial_[lane].seq == 0 &&
        seq == next_new_ && owed_.empty() && !in.is_duplicate(seq) && in.within_reach(seq) &&
        bytes.size() <= max_size_) [[likely]] {
      last_[lane] = seq;
      next_new_ = seq + 1;
      whole_ = bytes;
      return Outcome::complete;
    }
    return feed_slow(in, seq, flags, bytes);
  }
  // The completed message: `bytes` itself when it came in one frame, else the buffer.
  std::span<const std::byte> payload() const noexcept { return whole_; }
  // Whether there is a buffer to take (a completed message that came in pieces, or the
  // storage a dropped one left): take_buffer() frees it as before; otherwise it has nothing.
  bool buffered() const noexcept { return done_.capacity() != 0; }
  // Moves a buffered completed message out (empty when it came in one frame).
  std::vector<std::byte> take_buffer() noexcept {
    std::vector<std::byte> out;
    out.swap(done_);
    return out;
  }

 private:
  struct Partial {
    Seq seq = 0;  // 0: none
    bool duplicate = false;
    std::vector<std::byte> buf;
  };
  Result<Outcome> feed_slow(const InState& in, Seq seq, std::uint32_t flags,
                            std::span<const std::byte> bytes);
  Result<void> check_start(const InState& in, Seq seq, std::size_t lane);

  std::size_t max_size_;
  Seq next_new_;                    // one past the highest number started here
  std::deque<Seq> owed_;            // numbers the priority lane skipped: bulk owes them
  std::array<Seq, kLanes> last_{};  // per lane: the last number started here (0: none)
  std::array<Partial, kLanes> partial_{};
  std::vector<std::byte> done_;
  std::span<const std::byte> whole_;
};

}  // namespace rmsg::session
