// RecvRing: see recv_ring.h.
#include "rdma/recv_ring.h"

namespace rmsg::rdma {

void RecvRing::reset(std::uint32_t blocks) {
  state_.assign(blocks, State::idle);
  queue_.assign(blocks, Entry{0, 0});
  head_ = 0;
  count_ = 0;
  offset_ = 0;
}

bool RecvRing::on_control(std::uint32_t block) {
  if (block >= state_.size() || state_[block] != State::posted) return false;
  state_[block] = State::idle;
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

}  // namespace rmsg::rdma
