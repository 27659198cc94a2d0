// Which of a shard's calls are outstanding, readable from any thread, so that cancel()
// on a thread other than the call's loop can answer exactly (docs/messenger.md, RPC over
// several loops): one atomic word per call in a direct-mapped array, indexed by the
// call's number within its shard ((id - 1) / stride), so consecutive calls never share a
// slot. A call whose slot is still taken by an older one that is outstanding (more than
// `capacity` calls started since) goes to a small locked overflow map instead; only those
// calls, and a cancel that finds nothing in the array while the overflow is not empty,
// take the lock.
//
// A slot holds 0 (free), the id (outstanding) or the id with kClaimed (a cancel claimed
// it: the call completes as cancelled whatever arrives, and only that cancel returned
// true). Every change of a taken slot is a compare-and-swap, so a call's claim and its
// completion on the loop are decided once.
//
// Threading: add() any thread (the loop, or call() from another thread before its
// request is handed over); remove() and claimed() the loop's; claim() any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "rmsg/rpc.h"

namespace rmsg::rpc {

class CallStates {
 public:
  // `capacity`: slots wanted (rounded up to a power of two, 64..16384).
  CallStates(std::size_t capacity, CallId index, CallId stride)
      : mask_(slots_for(capacity) - 1),
        slots_(new std::atomic<std::uint64_t>[mask_ + 1]()),
        index_(index),
        stride_(stride),
        shift_(std::has_single_bit(stride) ? std::countr_zero(stride) : -1) {}

  // `id` is outstanding from now on.
  void add(CallId id) {
    std::uint64_t expect = 0;
    if (!slot(id).compare_exchange_strong(expect, id, std::memory_order_acq_rel)) [[unlikely]] {
      add_overflow(id);
    }
  }
  // The call completes (its own way, or cancelled). True when a cancel claimed it first:
  // it must complete as cancelled.
  bool remove(CallId id) {
    std::uint64_t expect = id;
    if (slot(id).compare_exchange_strong(expect, 0, std::memory_order_acq_rel)) [[likely]] {
      return false;
    }
    return remove_slow(id, expect);
  }
  // A cancel of `id`: true when it was outstanding and no cancel claimed it before.
  bool claim(CallId id);
  // Whether a cancel claimed `id` and the call has not completed yet.
  bool claimed(CallId id);

 private:
  static constexpr std::uint64_t kClaimed = std::uint64_t{1} << 63;  // ids stay below
  static std::size_t slots_for(std::size_t capacity) noexcept {
    return std::bit_ceil(std::clamp<std::size_t>(capacity, 64, 16384));
  }
  // The rare paths (rpc_call_states.cc): a slot taken by an older call, a claimed one.
  void add_overflow(CallId id);
  bool remove_slow(CallId id, std::uint64_t seen);
  // The call's number in its shard: (id - 1 - index) / stride, a shift for the usual
  // power-of-two loop counts (one loop: id - 1).
  std::atomic<std::uint64_t>& slot(CallId id) noexcept {
    const CallId k = shift_ >= 0 ? (id - 1) >> shift_ : (id - 1 - index_) / stride_;
    return slots_[k & mask_];
  }

  const std::size_t mask_;
  const std::unique_ptr<std::atomic<std::uint64_t>[]> slots_;
  const CallId index_;
  const CallId stride_;
  const int shift_;  // log2(stride) when a power of two, else -1
  std::mutex mu_;
  std::unordered_map<CallId, bool> overflow_;  // id -> claimed
  std::atomic<std::size_t> overflow_size_{0};
};

}  // namespace rmsg::rpc
