// Credits: the receive-side flow control of an RDMA stream (docs/protocol.md, Credits).
// A sender may post a SEND only when the peer has a receive posted for it; one credit is
// one such receive. Pure bookkeeping, no verbs: unit-tested on its own.
//
// Invariants that make it neither starve nor loop:
//   - data and FIN need 2 credits (the last one is kept for a credit-only message);
//   - a credit-only message is sent only when at least `threshold` (>= 2) re-posted
//     receives wait to be returned, so the single receive it consumes at the peer can
//     never by itself make the peer answer with another credit-only message;
//   - every message (data, FIN, credit) returns everything owed in its immediate data.
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/debug_assert.h"
#include "rdma/wire.h"

namespace rmsg::rdma {

class Credits {
 public:
  // `initial`: the peer's recv_block_count; `own_recv_blocks`: ours (sets the threshold).
  // The shared-receive mode (docs/protocol.md, Shared receive) lets windows grow:
  // `peer_limit` is then the peer's recv_window (credits never exceed it; 0: `initial`),
  // `own_limit` ours (what may be owed at most; 0: `own_recv_blocks`).
  void reset(std::uint32_t initial, std::uint32_t own_recv_blocks, std::uint32_t peer_limit = 0,
             std::uint32_t own_limit = 0) noexcept {
    credits_ = initial;
    limit_ = std::max(initial, peer_limit);
    own_ = std::max(own_recv_blocks, own_limit);
    owed_ = 0;
    threshold_ = std::max<std::uint32_t>(2, own_recv_blocks / 2);
  }

  std::uint32_t available() const noexcept { return credits_; }
  std::uint32_t owed() const noexcept { return owed_; }
  std::uint32_t threshold() const noexcept { return threshold_; }

  bool can_send_data() const noexcept { return credits_ >= 2; }
  bool should_send_credit() const noexcept { return credits_ >= 1 && owed_ >= threshold_; }

  // A message is being posted: takes what it returns (for its immediate data).
  std::uint16_t take_owed() noexcept {
    const auto n = std::min(owed_, wire::kMaxCreditsPerMessage);
    owed_ -= n;
    return static_cast<std::uint16_t>(n);
  }
  void on_sent() noexcept {
    RMSG_DEBUG_ASSERT(credits_ > 0);  // never negative: every post checked can_send_*
    --credits_;
  }
  // The peer returned `n` credits. It can return at most what we sent and it consumed, so
  // credits never exceed its recv_block_count: false (nothing changes) when they would, a
  // protocol error of the peer's — the counts can then never overflow.
  [[nodiscard]] bool on_granted(std::uint32_t n) noexcept {
    if (n > limit_ - credits_) return false;
    credits_ += n;
    return true;
  }
  // A release message drops `n` credits besides the one it spent (shared-receive mode):
  // false (nothing changes) when fewer are held.
  [[nodiscard]] bool drop(std::uint32_t n) noexcept {
    if (n > credits_) return false;
    credits_ -= n;
    return true;
  }
  void on_reposted(std::uint32_t n = 1) noexcept {
    owed_ += n;
    RMSG_DEBUG_ASSERT(owed_ <= own_ || own_ == 0);  // one owed credit per receive block
  }

 private:
  std::uint32_t credits_ = 0;
  std::uint32_t owed_ = 0;
  std::uint32_t threshold_ = 2;
  std::uint32_t limit_ = 0;  // the peer's recv_block_count (shared receive: recv_window)
  std::uint32_t own_ = 0;    // our recv_block_count (shared receive: our recv_window)
};

}  // namespace rmsg::rdma
