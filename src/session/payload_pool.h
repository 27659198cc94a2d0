// PayloadPool: one shard's spare message buffers, so that a small message costs no
// allocation. The shard's OutQueues give back the payloads their peer acknowledged; RPC
// takes them for what it encodes on the loop (requests, replies, cancels) and for the
// bodies of the replies it hands to callers. In request/response traffic every message
// acknowledged frees one buffer and every message encoded needs one, so the pool turns over
// instead of malloc and free per message.
//
// Bounded: at most kMaxBuffers kept, and none whose capacity is above kMaxCapacity (the
// buffer of a 4 MiB value is freed, not kept), so it holds at most 512 KiB.
//
// Threading: none (the shard's loop thread; calls from other threads allocate their own).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace rmsg::session {

class PayloadPool {
 public:
  using Buffer = std::vector<std::byte>;
  static constexpr std::size_t kMaxBuffers = 32;
  static constexpr std::size_t kMaxCapacity = std::size_t{16} << 10;

  PayloadPool() { spare_.reserve(kMaxBuffers); }

  // An empty buffer, with the capacity of one given back when there is one (callers
  // append: no bytes are zeroed for nothing).
  Buffer take() noexcept {
    if (spare_.empty()) return {};
    Buffer b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  // Keeps `b`'s storage for a later take() when there is room and it is small enough;
  // otherwise `b` is left as it was (its owner frees it).
  void give(Buffer&& b) noexcept {
    if (b.capacity() == 0 || b.capacity() > kMaxCapacity || spare_.size() >= kMaxBuffers) return;
    b.clear();
    spare_.push_back(std::move(b));  // reserved: no allocation
  }
  std::size_t size() const noexcept { return spare_.size(); }

 private:
  std::vector<Buffer> spare_;
};

}  // namespace rmsg::session
