// The shared-receive mode's credit bookkeeping (docs/protocol.md, Shared receive): how many
// receive blocks of a pool (one SRQ per loop and device) each connection may have its peer
// send into, and how that changes. Pure bookkeeping, no verbs: unit-tested on the host
// (tests/rdma/credit_lease_test.cc), the stream and the pool make every decision here.
//
// Two classes:
//   ReceiveBudget  the pool: C connections x G guaranteed blocks plus L lease blocks.
//                  Admission takes a guaranteed part (refused, and counted, beyond C);
//                  leases come from the L blocks only, so admitting never waits for a
//                  lease to come back and the windows' sum never exceeds the pool.
//   CreditLease    one connection's receive window w in [G, ceiling]: grows by leases
//                  returned with credits, shrinks by withheld re-posts and by the peer's
//                  release messages, never below G.
//
// Invariant (no RNR by construction): sum over connections of w <= C*G + L = blocks(),
// every block that holds no unread data is posted, and the SENDs that can arrive are
// w - unread - owed per connection, so they never exceed the posted receives.
//
// Threading: none of its own (the pool's loop thread).
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/debug_assert.h"

namespace rmsg::rdma {

struct ReceiveBudgetConfig {
  std::uint32_t connections = 0;   // C: connections the pool admits
  std::uint32_t guaranteed = 4;    // G: blocks (credits) each admitted connection always has
  std::uint32_t lease_blocks = 0;  // L: blocks lent to busy connections
  std::uint32_t lease_step = 4;    // the most one grant adds to a window
  // Posted receives below which the SRQ's limit event fires (0: never armed).
  std::uint32_t low_water = 0;
};

class ReceiveBudget {
 public:
  explicit ReceiveBudget(const ReceiveBudgetConfig& config) noexcept : config_(config) {}

  const ReceiveBudgetConfig& config() const noexcept { return config_; }
  // Blocks the pool registers and posts: C*G + L.
  std::uint64_t blocks() const noexcept {
    return std::uint64_t{config_.connections} * config_.guaranteed + config_.lease_blocks;
  }

  // A connection wants its guaranteed part. False (counted as refused) when C are admitted.
  bool admit() noexcept {
    if (admitted_ >= config_.connections) {
      ++refused_;
      return false;
    }
    ++admitted_;
    return true;
  }
  // An admitted connection ends; `leased` is what its window held beyond G.
  void leave(std::uint32_t leased) noexcept {
    RMSG_DEBUG_ASSERT(admitted_ > 0 && leased <= leased_);
    if (admitted_ > 0) --admitted_;
    give_back(leased);
  }

  // Up to `want` lease blocks (at most lease_step), none while the alarm is raised.
  std::uint32_t lease(std::uint32_t want) noexcept {
    if (pressure_) return 0;
    const std::uint32_t n = std::min({want, config_.lease_step, config_.lease_blocks - leased_});
    leased_ += n;
    peak_leased_ = std::max(peak_leased_, leased_);
    return n;
  }
  // A window shrank by `n` leased blocks (withheld re-posts, a release, a connection's end).
  void give_back(std::uint32_t n) noexcept {
    RMSG_DEBUG_ASSERT(n <= leased_);
    leased_ -= std::min(n, leased_);
  }

  // The SRQ's limit event (IBV_EVENT_SRQ_LIMIT_REACHED): stop lending, shrink windows.
  void on_limit_reached() noexcept {
    pressure_ = true;
    ++alarms_;
  }
  // The posted receives now: ends the alarm once they are back above twice the low-water
  // mark. True when the limit should be armed again (the alarm just ended).
  bool on_posted_level(std::uint64_t posted) noexcept {
    if (!pressure_ || posted < 2 * std::uint64_t{config_.low_water}) return false;
    pressure_ = false;
    return config_.low_water != 0;
  }
  bool pressure() const noexcept { return pressure_; }

  std::uint32_t admitted() const noexcept { return admitted_; }
  std::uint32_t leased() const noexcept { return leased_; }
  std::uint32_t peak_leased() const noexcept { return peak_leased_; }
  std::uint64_t refused() const noexcept { return refused_; }
  std::uint64_t alarms() const noexcept { return alarms_; }

 private:
  ReceiveBudgetConfig config_;
  std::uint32_t admitted_ = 0;
  std::uint32_t leased_ = 0;
  std::uint32_t peak_leased_ = 0;
  std::uint64_t refused_ = 0;
  std::uint64_t alarms_ = 0;
  bool pressure_ = false;
};

// One connection's receive window (the receiving side's view).
class CreditLease {
 public:
  // `guaranteed`: G, our hello's recv_block_count (>= 4); `ceiling`: our hello's
  // recv_window (>= G).
  void reset(std::uint32_t guaranteed, std::uint32_t ceiling) noexcept {
    RMSG_DEBUG_ASSERT(ceiling >= guaranteed);
    guaranteed_ = guaranteed;
    ceiling_ = std::max(ceiling, guaranteed);
    window_ = guaranteed;
    data_since_return_ = 0;
  }

  std::uint32_t window() const noexcept { return window_; }
  std::uint32_t guaranteed() const noexcept { return guaranteed_; }
  std::uint32_t ceiling() const noexcept { return ceiling_; }
  std::uint32_t leased() const noexcept { return window_ - guaranteed_; }

  // A data message arrived (the busy signal).
  void on_data() noexcept { ++data_since_return_; }

  // A consumed block was re-posted to the pool. True: its credit is owed to the peer as
  // usual. False: withheld (only while `shrink` and the window is above G): the window
  // lost one block, which the caller gives back to the ReceiveBudget.
  bool on_reposted(bool shrink) noexcept {
    if (!shrink || window_ <= guaranteed_) return true;
    --window_;
    return false;
  }

  // How many lease blocks to ask the budget for with the return being sent now: the peer
  // is busy when at least `threshold` data messages arrived since the previous return
  // (it spends credits faster than single credit messages give them back). Resets the
  // count: every return is a new measuring period.
  std::uint32_t wanted(std::uint32_t threshold) noexcept {
    const bool busy = data_since_return_ >= threshold;
    data_since_return_ = 0;
    return busy ? ceiling_ - window_ : 0;
  }
  // The budget lent `n` (<= ceiling - window): they go to the peer with the return.
  void grow(std::uint32_t n) noexcept {
    RMSG_DEBUG_ASSERT(n <= ceiling_ - window_);
    window_ += std::min(n, ceiling_ - window_);
  }

  // The peer released `n` credits (a release message). False (nothing changes): the
  // window would fall below G, a protocol error of the peer's.
  [[nodiscard]] bool on_release(std::uint32_t n) noexcept {
    if (n == 0 || n > window_ - guaranteed_) return false;
    window_ -= n;
    return true;
  }

 private:
  std::uint32_t guaranteed_ = 0;
  std::uint32_t ceiling_ = 0;
  std::uint32_t window_ = 0;
  std::uint32_t data_since_return_ = 0;
};

// The sending side's rule for a release message: credits held beyond the peer's G plus
// the one the release spends, when it sent no data for a keepalive interval (0: none due).
constexpr std::uint32_t release_due(std::uint32_t credits, std::uint32_t peer_guaranteed,
                                    bool idle) noexcept {
  if (!idle || credits < 2 || credits <= peer_guaranteed + 1) return 0;
  return credits - 1 - peer_guaranteed;
}

}  // namespace rmsg::rdma
