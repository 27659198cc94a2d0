// SendRing: see send_ring.h.
#include "rdma/send_ring.h"

#include <algorithm>
#include <utility>

#include "base/debug_assert.h"

namespace rmsg::rdma {

void SendRing::reset(std::uint32_t blocks, std::uint32_t slots, std::uint32_t first_block,
                     std::uint32_t first_slot) {
  blocks_ = blocks;
  slots_ = slots;
  head_ = blocks == 0 ? 0 : first_block % blocks;
  oldest_ = slots == 0 ? 0 : first_slot % slots;
  blocks_in_use_ = 0;
  staged_ = 0;
  in_flight_ = 0;
  unsignalled_ = 0;
  signalled_ = 0;
  marked_ = 0;
  slot_flags_.assign(slots, 0);
  block_busy_.assign(blocks, 0);
  fill_.assign(blocks, 0);
}

bool SendRing::can_stage(std::uint32_t capacity) const noexcept {
  if (free_blocks() > 0) return true;
  return staged_ > 0 && fill_[head_ == 0 ? blocks_ - 1 : head_ - 1] < capacity;
}

SendRing::Stage SendRing::stage(std::uint32_t capacity, std::uint32_t want) {
  if (staged_ > 0) {
    const std::uint32_t last = head_ == 0 ? blocks_ - 1 : head_ - 1;
    if (fill_[last] < capacity) {
      const Stage st{last, fill_[last], std::min(want, capacity - fill_[last])};
      fill_[last] += st.len;
      return st;
    }
  }
  if (free_blocks() == 0) return {0, 0, 0};
  RMSG_DEBUG_ASSERT(block_busy_[head_] == 0);
  const Stage st{head_, 0, std::min(want, capacity)};
  block_busy_[head_] = 1;
  fill_[head_] = st.len;
  ++staged_;
  head_ = head_ + 1 == blocks_ ? 0 : head_ + 1;
  check();
  return st;
}

SendRing::Post SendRing::post_staged(bool force_signal) {
  RMSG_DEBUG_ASSERT(in_flight_ < slots_ && staged_ > 0);
  const std::uint32_t block = wrap_add(head_, blocks_ - staged_, blocks_);
  Post p = take_slot(true, block, signal_rule(force_signal, free_blocks(), free_slots() - 1));
  p.len = std::exchange(fill_[block], 0);
  --staged_;
  ++blocks_in_use_;
  check();
  return p;
}

std::uint32_t SendRing::complete(std::uint32_t slot) {
  if (slot >= slots_) return 0;
  const std::uint32_t distance = wrap_add(slot, slots_ - oldest_, slots_);
  if (distance >= in_flight_) return 0;  // not in flight: stale, repeated or bogus
  const std::uint32_t n = distance + 1;
  // The oldest block in use: blocks are taken in order, so the WRs completing now free
  // the blocks from there on.
  std::uint32_t tail = wrap_add(head_, blocks_ - blocks_in_use_ - staged_, blocks_);
  for (std::uint32_t i = 0, s = oldest_; i < n; ++i, s = s + 1 == slots_ ? 0 : s + 1) {
    if ((slot_flags_[s] & kSignalled) != 0) --signalled_;
    if ((slot_flags_[s] & kHoldsBlock) != 0) {
      RMSG_DEBUG_ASSERT(block_busy_[tail] == 1);
      block_busy_[tail] = 0;
      tail = tail + 1 == blocks_ ? 0 : tail + 1;
      --blocks_in_use_;
    }
    slot_flags_[s] = 0;
  }
  oldest_ = wrap_add(oldest_, n, slots_);
  in_flight_ -= n;
  marked_ = marked_ > n ? marked_ - n : 0;
  check();
  return n;
}

}  // namespace rmsg::rdma
