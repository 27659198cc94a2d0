// SendRing: the send side of an RDMA stream without verbs — which send block the next
// data message fills, which send-queue slot its WR takes, whether that WR is signalled,
// and which blocks a send completion frees. RdmaStream makes every one of these
// decisions through this class, so the unit tests (tests/rdma/send_ring_test.cc) drive
// the same code the stream runs.
//
// Positions are indices, never counters: the next block is `head` in [0, blocks), the
// oldest WR in flight is `oldest` in [0, slots), and the wr_id of a send carries its slot
// (docs/protocol.md, Local conventions). Nothing grows with the stream's lifetime, so
// nothing wraps except an index back to 0, for any block count and any SQ depth.
//
// A completion of slot s completes every WR from `oldest` to s (a QP completes its sends
// in order; unsignalled WRs complete with the next signalled one). A slot that is not in
// flight (a bogus or repeated completion) is refused, not counted.
//
// Staging: bytes that cannot be posted now (no credit, no SQ slot) fill unposted blocks
// that follow the posted ones, appending to the last while it has room; post_staged()
// posts the oldest of them later. Blocks go out in ring order whichever way they are
// posted, so the bytes keep their order and completions free blocks in order.
//
// Invariants (checked in debug builds): blocks in use + staged <= blocks, WRs in flight <=
// slots, a block is handed out only when free, and never twice.
//
// Threading: none of its own (the stream's loop thread).
#pragma once

#include <cstdint>
#include <vector>

#include "base/debug_assert.h"

namespace rmsg::rdma {

class SendRing {
 public:
  struct Post {
    std::uint32_t slot;   // the WR's send-queue slot: its wr_id index
    std::uint32_t block;  // the block a data WR fills (meaningless for control)
    bool signalled;       // post it IBV_SEND_SIGNALED
    std::uint32_t len;    // post_staged(): the bytes staged in the block
  };
  // Room for staged bytes: `len` bytes at `offset` of `block` (len 0: no room).
  struct Stage {
    std::uint32_t block;
    std::uint32_t offset;
    std::uint32_t len;
  };

  // `blocks` send blocks (>= 1) and `slots` WR slots (the SQ depth, > blocks). The first
  // block filled is `first_block`, the first slot `first_slot` (tests start near the end
  // of the index range).
  void reset(std::uint32_t blocks, std::uint32_t slots, std::uint32_t first_block = 0,
             std::uint32_t first_slot = 0);

  std::uint32_t blocks() const noexcept { return blocks_; }
  std::uint32_t slots() const noexcept { return slots_; }
  std::uint32_t free_blocks() const noexcept { return blocks_ - blocks_in_use_ - staged_; }
  std::uint32_t staged_blocks() const noexcept { return staged_; }
  std::uint32_t free_slots() const noexcept { return slots_ - in_flight_; }
  std::uint32_t in_flight() const noexcept { return in_flight_; }
  // Signalled WRs in flight: while 0, no successful send completion can come (the stream
  // then leaves its send CQ unpolled; an error completes on both CQs).
  std::uint32_t signalled_in_flight() const noexcept { return signalled_; }
  // The block the next data message fills.
  std::uint32_t head_block() const noexcept { return head_; }

  // The next WR is posted: a data WR takes the head block (free_blocks() > 0, nothing
  // staged), every WR a slot (free_slots() > 0). `force_signal`: signalled whatever the
  // rule says.
  // Signalled when it takes the last free block or leaves at most one slot, or every
  // blocks/2 WRs: a writer that runs out of space always has a completion coming.
  Post post(bool data, bool force_signal = false) {
    RMSG_DEBUG_ASSERT(in_flight_ < slots_);
    RMSG_DEBUG_ASSERT(!data || (free_blocks() > 0 && staged_ == 0));
    const bool signal = signal_rule(force_signal, free_blocks() - (data ? 1 : 0), free_slots() - 1);
    const Post p = take_slot(data, head_, signal);
    if (data) {
      RMSG_DEBUG_ASSERT(block_busy_[head_] == 0);  // never handed out twice
      block_busy_[head_] = 1;
      ++blocks_in_use_;
      head_ = head_ + 1 == blocks_ ? 0 : head_ + 1;
    }
    check();
    return p;
  }

  // Up to `want` bytes staged in blocks of `capacity` bytes: the rest of the last staged
  // block if it has room, else a free block, which becomes staged. Returns where the
  // caller copies them (len 0: every block is posted or staged full).
  Stage stage(std::uint32_t capacity, std::uint32_t want);
  // True when stage() would find room.
  bool can_stage(std::uint32_t capacity) const noexcept;
  // The oldest staged block is posted (staged_blocks() > 0, free_slots() > 0): its slot,
  // signalling (the rule of post()) and length.
  Post post_staged(bool force_signal = false);

  // A successful send completion of `slot`. Returns the number of WRs it completed; 0 when
  // the slot is not in flight.
  std::uint32_t complete(std::uint32_t slot);

  // Marks the WRs in flight now; marked_done() once all of them completed (a window probe
  // waits for its own completion this way).
  void mark() noexcept { marked_ = in_flight_; }
  bool marked_done() const noexcept { return marked_ == 0; }

 private:
  void check() const {
    RMSG_DEBUG_ASSERT(blocks_in_use_ + staged_ <= blocks_);
    RMSG_DEBUG_ASSERT(in_flight_ <= slots_);
    RMSG_DEBUG_ASSERT(blocks_in_use_ <= in_flight_);  // each block in use has its WR in flight
    RMSG_DEBUG_ASSERT(marked_ <= in_flight_);
    RMSG_DEBUG_ASSERT(signalled_ <= in_flight_);
    RMSG_DEBUG_ASSERT(head_ < blocks_ && oldest_ < slots_);
  }
  // (a + b) mod n for a + b < 2n: no division on the data path.
  static std::uint32_t wrap_add(std::uint32_t a, std::uint32_t b, std::uint32_t n) noexcept {
    const std::uint32_t s = a + b;
    return s >= n ? s - n : s;
  }

  std::uint32_t blocks_ = 0;
  std::uint32_t slots_ = 0;
  std::uint32_t head_ = 0;           // next block to fill
  std::uint32_t blocks_in_use_ = 0;  // posted and not known complete
  std::uint32_t staged_ = 0;         // filled and not posted (after those in use)
  std::uint32_t oldest_ = 0;         // slot of the oldest WR in flight
  std::uint32_t in_flight_ = 0;      // WRs posted and not known complete
  std::uint32_t unsignalled_ = 0;    // WRs since the last signalled one
  std::uint32_t signalled_ = 0;      // signalled WRs in flight
  std::uint32_t marked_ = 0;         // WRs of the mark still in flight
  // per slot: kHoldsBlock (its WR holds a block), kSignalled (its WR is signalled)
  std::vector<std::uint8_t> slot_flags_;
  std::vector<std::uint8_t> block_busy_;  // per block: handed out and not freed
  std::vector<std::uint32_t> fill_;       // per staged block: bytes in it

  static constexpr std::uint8_t kHoldsBlock = 1;
  static constexpr std::uint8_t kSignalled = 2;

  // Without a signalled WR at the point where space runs out, no completion would come to
  // free it, and writable readiness would never hold again.
  bool signal_rule(bool force, std::uint32_t blocks_after, std::uint32_t slots_after) const {
    const std::uint32_t interval = blocks_ > 1 ? blocks_ / 2 : 1;
    return force || blocks_after == 0 || slots_after <= 1 || unsignalled_ + 1 >= interval;
  }
  Post take_slot(bool data, std::uint32_t block, bool signal) {
    Post p{wrap_add(oldest_, in_flight_, slots_), block, signal, 0};
    slot_flags_[p.slot] = (data ? kHoldsBlock : 0) | (signal ? kSignalled : 0);
    ++in_flight_;
    signalled_ += signal ? 1 : 0;
    unsignalled_ = signal ? 0 : unsignalled_ + 1;
    return p;
  }
};

}  // namespace rmsg::rdma
