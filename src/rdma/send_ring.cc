// SendRing: see send_ring.h.
#include "rdma/send_ring.h"

#include <algorithm>

#include "base/debug_assert.h"

namespace rmsg::rdma {

void SendRing::reset(std::uint32_t blocks, std::uint32_t slots, std::uint32_t first_block,
                     std::uint32_t first_slot) {
  blocks_ = blocks;
  slots_ = slots;
  head_ = blocks == 0 ? 0 : first_block % blocks;
  oldest_ = slots == 0 ? 0 : first_slot % slots;
  blocks_in_use_ = 0;
  in_flight_ = 0;
  unsignalled_ = 0;
  marked_ = 0;
  slot_blocks_.assign(slots, 0);
  block_busy_.assign(blocks, 0);
}

SendRing::Post SendRing::post(bool data, bool force_signal) {
  RMSG_DEBUG_ASSERT(in_flight_ < slots_);
  RMSG_DEBUG_ASSERT(!data || blocks_in_use_ < blocks_);
  const std::uint32_t blocks_after = free_blocks() - (data ? 1 : 0);
  const std::uint32_t slots_after = free_slots() - 1;
  const std::uint32_t interval = std::max<std::uint32_t>(1, blocks_ / 2);
  // Without a signalled WR at the point where space runs out, no completion would come to
  // free it, and writable readiness would never hold again.
  const bool signal =
      force_signal || blocks_after == 0 || slots_after <= 1 || unsignalled_ + 1 >= interval;
  Post p{(oldest_ + in_flight_) % slots_, head_, signal};
  slot_blocks_[p.slot] = data ? 1 : 0;
  ++in_flight_;
  if (data) {
    RMSG_DEBUG_ASSERT(block_busy_[head_] == 0);  // never handed out twice
    block_busy_[head_] = 1;
    ++blocks_in_use_;
    head_ = head_ + 1 == blocks_ ? 0 : head_ + 1;
  }
  unsignalled_ = signal ? 0 : unsignalled_ + 1;
  check();
  return p;
}

std::uint32_t SendRing::complete(std::uint32_t slot) {
  if (slot >= slots_) return 0;
  const std::uint32_t distance = (slot + slots_ - oldest_) % slots_;
  if (distance >= in_flight_) return 0;  // not in flight: stale, repeated or bogus
  const std::uint32_t n = distance + 1;
  // The oldest block in use: blocks are taken in order, so the WRs completing now free
  // the blocks from there on.
  std::uint32_t tail = (head_ + blocks_ - blocks_in_use_) % blocks_;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t s = (oldest_ + i) % slots_;
    if (slot_blocks_[s] != 0) {
      RMSG_DEBUG_ASSERT(block_busy_[tail] == 1);
      block_busy_[tail] = 0;
      tail = tail + 1 == blocks_ ? 0 : tail + 1;
      --blocks_in_use_;
    }
    slot_blocks_[s] = 0;
  }
  oldest_ = (oldest_ + n) % slots_;
  in_flight_ -= n;
  marked_ = marked_ > n ? marked_ - n : 0;
  check();
  return n;
}

void SendRing::check() const {
  RMSG_DEBUG_ASSERT(blocks_in_use_ <= blocks_);
  RMSG_DEBUG_ASSERT(in_flight_ <= slots_);
  RMSG_DEBUG_ASSERT(blocks_in_use_ <= in_flight_);  // each block in use has its WR in flight
  RMSG_DEBUG_ASSERT(marked_ <= in_flight_);
  RMSG_DEBUG_ASSERT(head_ < blocks_ && oldest_ < slots_);
}

}  // namespace rmsg::rdma
