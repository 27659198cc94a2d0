// RecvRing: the receive side of an RDMA stream without verbs — which blocks are posted,
// the queue of received data blocks in arrival order, how much of the front one read()
// consumed, and which block is due for a re-post. RdmaStream makes each of these
// decisions through this class; the unit tests (tests/rdma/recv_ring_test.cc) drive it
// directly.
//
// At most `blocks` receives exist, so the ready queue is a fixed ring of that size: no
// counter grows with the stream's lifetime.
//
// Invariants (checked in debug builds): queued <= blocks; a block is queued only while it
// was posted, so never handed to read() twice; a block is re-posted only once consumed.
//
// Threading: none of its own (the stream's loop thread).
#pragma once

#include <cstdint>
#include <vector>

#include "base/debug_assert.h"

namespace rmsg::rdma {

class RecvRing {
 public:
  struct Front {
    std::uint32_t block;
    std::uint32_t offset;  // bytes of it already read
    std::uint32_t len;     // its message's length
  };

  // `blocks` receive blocks, none posted yet (on_posted for each).
  void reset(std::uint32_t blocks);
  std::uint32_t blocks() const noexcept { return static_cast<std::uint32_t>(state_.size()); }

  // A receive of `block` was posted (at setup, or a re-post of a consumed block).
  void on_posted(std::uint32_t block) {
    RMSG_DEBUG_ASSERT(block < state_.size() && state_[block] == State::idle);
    if (block < state_.size()) state_[block] = State::posted;
  }
  // The receive of `block` completed with a data message of `len` (> 0) bytes: queued for
  // read(). False (nothing changes) when the block is out of range or not posted.
  bool on_data(std::uint32_t block, std::uint32_t len) {
    if (block >= state_.size() || state_[block] != State::posted) return false;
    RMSG_DEBUG_ASSERT(count_ < queue_.size() && len > 0);
    const auto size = static_cast<std::uint32_t>(queue_.size());
    const std::uint32_t at = head_ + count_;
    queue_[at >= size ? at - size : at] = {block, len};
    ++count_;
    state_[block] = State::queued;
    check();
    return true;
  }
  // The receive of `block` completed with a control message: the block is free to
  // re-post at once. False when it is out of range or not posted.
  bool on_control(std::uint32_t block);

  bool empty() const noexcept { return count_ == 0; }
  std::uint32_t queued() const noexcept { return count_; }
  Front front() const noexcept {
    RMSG_DEBUG_ASSERT(count_ > 0);
    const Entry& e = queue_[head_];
    return {e.block, offset_, e.len};
  }
  // read() took `n` bytes (<= what the front has left). Returns true when that used up
  // the front block, which is then off the queue and due for a re-post (its number is
  // what front().block was).
  bool consume(std::uint32_t n) {
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
  // Every queued block is dropped (the ring memory is going away).
  void clear();

 private:
  enum class State : std::uint8_t { idle, posted, queued };
  struct Entry {
    std::uint32_t block;
    std::uint32_t len;
  };
  void check() const {
    RMSG_DEBUG_ASSERT(count_ <= queue_.size());
    RMSG_DEBUG_ASSERT(head_ < queue_.size() || queue_.empty());
  }

  std::vector<State> state_;
  std::vector<Entry> queue_;  // a ring of blocks() entries
  std::uint32_t head_ = 0;    // index in queue_ of the front
  std::uint32_t count_ = 0;
  std::uint32_t offset_ = 0;  // of the front
};

}  // namespace rmsg::rdma
