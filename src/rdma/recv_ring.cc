// RecvRing: see recv_ring.h.
#include "rdma/recv_ring.h"

#include "base/debug_assert.h"

namespace rmsg::rdma {

void RecvRing::reset(std::uint32_t blocks) {
  state_.assign(blocks, State::idle);
  queue_.assign(blocks, Entry{0, 0});
  head_ = 0;
  count_ = 0;
  offset_ = 0;
}

void RecvRing::on_posted(std::uint32_t block) {
  RMSG_DEBUG_ASSERT(block < state_.size() && state_[block] == State::idle);
  if (block < state_.size()) state_[block] = State::posted;
}

bool RecvRing::on_data(std::uint32_t block, std::uint32_t len) {
  if (block >= state_.size() || state_[block] != State::posted) return false;
  RMSG_DEBUG_ASSERT(count_ < queue_.size() && len > 0);
  const auto size = static_cast<std::uint32_t>(queue_.size());
  queue_[(head_ + count_) % size] = {block, len};
  ++count_;
  state_[block] = State::queued;
  check();
  return true;
}

bool RecvRing::on_control(std::uint32_t block) {
  if (block >= state_.size() || state_[block] != State::posted) return false;
  state_[block] = State::idle;
  return true;
}

RecvRing::Front RecvRing::front() const noexcept {
  RMSG_DEBUG_ASSERT(count_ > 0);
  const Entry& e = queue_[head_];
  return {e.block, offset_, e.len};
}

bool RecvRing::consume(std::uint32_t n) {
  RMSG_DEBUG_ASSERT(count_ > 0);
  const Entry& e = queue_[head_];
  RMSG_DEBUG_ASSERT(n <= e.len - offset_);
  offset_ += n;
  if (offset_ < e.len) return false;
  state_[e.block] = State::idle;
  head_ = head_ + 1 == queue_.size() ? 0 : head_ + 1;
  --count_;
  offset_ = 0;
  check();
  return true;
}

void RecvRing::clear() {
  for (std::uint32_t i = 0; i < count_; ++i) {
    state_[queue_[(head_ + i) % queue_.size()].block] = State::idle;
  }
  head_ = 0;
  count_ = 0;
  offset_ = 0;
}

void RecvRing::check() const {
  RMSG_DEBUG_ASSERT(count_ <= queue_.size());
  RMSG_DEBUG_ASSERT(head_ < queue_.size() || queue_.empty());
}

}  // namespace rmsg::rdma
