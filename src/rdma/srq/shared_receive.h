// SharedReceive: the receive pool of one event loop and device in the shared-receive mode
// (docs/protocol.md, Shared receive): a protection domain, one slab of registered blocks,
// and the shared receive queue (SRQ) every one of them is posted to, with the credit
// budget (srq/credit_lease.h) that admits connections and lends blocks.
//
// A stream in the mode builds its QP on this PD and SRQ; the receive completions still
// arrive on the stream's own receive CQ (the QP's), carrying the pool's wr_id (generation
// kPoolGeneration, the block's index), so no dispatch is needed. A stream posts a block
// back (post) once it read it or took a control message from it. A stream that ends gives
// back its unread blocks and, after its QP went ERR then RESET, the blocks of what its CQ
// still holds (the order docs/protocol.md proves).
//
// Ownership: shared by the streams that use it; the loop's registry holds a weak
// reference, so the pool (its SRQ, MR, memory and PD) goes with its last stream.
// Threading: the loop thread.
#pragma once

#include <cstdint>
#include <memory>

#include "rdma/srq/credit_lease.h"
#include "rmsg/counters.h"
#include "rmsg/event_loop.h"
#include "rmsg/rdma.h"
#include "rmsg/result.h"
#include "verbs/verbs.h"

namespace rmsg::rdma {

class SharedReceive {
 public:
  // The generation in the wr_id of every pool receive (never a structure's: those count
  // from 1 and are compared per stream; pool completions are told by the stream's mode).
  static constexpr std::uint16_t kPoolGeneration = 0;

  // The pool of `loop` for device `ctx`, built on first use from `options` (block size,
  // budget). Errors: Errc::invalid_argument (a budget below 4 guaranteed credits, a
  // window below them, a block outside 64 B..16 MiB), those of the verbs calls (memlock:
  // rmsg::memlock_limit_error()).
  static Result<std::shared_ptr<SharedReceive>> for_loop(EventLoop& loop, ibv_context* ctx,
                                                         const RdmaOptions& options);
  SharedReceive(const SharedReceive&) = delete;
  SharedReceive& operator=(const SharedReceive&) = delete;
  SharedReceive(SharedReceive&&) = delete;
  SharedReceive& operator=(SharedReceive&&) = delete;
  ~SharedReceive();

  const std::shared_ptr<verbs::Pd>& pd() const noexcept { return pd_; }
  ibv_srq* srq() const noexcept { return srq_; }
  std::uint32_t block_size() const noexcept { return block_size_; }
  std::uint32_t window() const noexcept { return window_; }  // a connection's ceiling
  std::uint32_t blocks() const noexcept { return blocks_; }
  std::byte* block(std::uint32_t i) const noexcept {
    return slab_.get() + static_cast<std::size_t>(i) * block_size_;
  }
  // Posts block `i` to the SRQ: 0 or the provider's errno.
  int post(std::uint32_t i);
  std::uint64_t posted() const noexcept { return posted_; }
  // A receive completed (the block left the SRQ).
  void on_taken() noexcept {
    if (posted_ > 0) --posted_;
    if (posted_ < budget_.config().low_water && !budget_.pressure()) budget_.on_limit_reached();
  }

  ReceiveBudget& budget() noexcept { return budget_; }
  // srq_admit_refused, srq_alarms, srq_blocks (gauge), srq_leased (gauge).
  const CounterSet& counters();

 private:
  SharedReceive() = default;
  Result<void> build(ibv_context* ctx, const RdmaOptions& options);

  std::shared_ptr<verbs::Pd> pd_;
  verbs::Buffer slab_;
  verbs::Mr mr_;
  ibv_srq* srq_ = nullptr;
  std::uint32_t block_size_ = 0;
  std::uint32_t blocks_ = 0;
  std::uint32_t window_ = 0;
  std::uint64_t posted_ = 0;
  ReceiveBudget budget_{ReceiveBudgetConfig{}};
  CounterSet set_;
};

}  // namespace rmsg::rdma
