// SharedReceive: see shared_receive.h.
#include "rdma/srq/shared_receive.h"

#include <cerrno>
#include <map>
#include <utility>

#include "rdma/wire.h"
#include "rmsg/log.h"

namespace rmsg::rdma {
namespace {

const char kServiceKey = 0;

// The loop's pools by device: weak, a pool goes with its last stream.
struct Registry {
  std::map<ibv_context*, std::weak_ptr<SharedReceive>> pools;
};

}  // namespace

Result<std::shared_ptr<SharedReceive>> SharedReceive::for_loop(EventLoop& loop, ibv_context* ctx,
                                                               const RdmaOptions& options) {
  auto registry = std::static_pointer_cast<Registry>(loop.service(&kServiceKey));
  if (!registry) {
    registry = std::make_shared<Registry>();
    loop.set_service(&kServiceKey, registry);
  }
  auto& slot = registry->pools[ctx];
  if (auto existing = slot.lock()) return existing;
  std::shared_ptr<SharedReceive> pool(new SharedReceive());
  RMSG_TRY(pool->build(ctx, options));
  slot = pool;
  return pool;
}

Result<void> SharedReceive::build(ibv_context* ctx, const RdmaOptions& o) {
  if (o.shared_guaranteed < wire::kMinRecvBlocks || o.shared_window < o.shared_guaranteed ||
      o.shared_block_size < 64 || o.shared_block_size > (16u << 20) || o.shared_connections == 0 ||
      o.shared_window > 0xFFFF) {
    return Errc::invalid_argument;
  }
  const ReceiveBudgetConfig config{o.shared_connections, o.shared_guaranteed, o.shared_lease_blocks,
                                   o.shared_guaranteed,
                                   /*low_water=*/o.shared_lease_blocks / 4};
  budget_ = ReceiveBudget(config);
  const std::uint64_t blocks = budget_.blocks();
  if (blocks > (1u << 24)) return Errc::invalid_argument;
  blocks_ = static_cast<std::uint32_t>(blocks);
  block_size_ = o.shared_block_size;
  window_ = o.shared_window;
  auto pd = verbs::alloc_pd(ctx);
  if (!pd) return pd.error();
  pd_ = std::make_shared<verbs::Pd>(std::move(pd).value());
  const std::size_t len = std::size_t{blocks_} * block_size_;
  auto slab = verbs::allocate_buffer(len);
  if (!slab) return slab.error();
  slab_ = std::move(slab).value();
  auto mr = verbs::reg_mr(pd_->get(), slab_.get(), len, IBV_ACCESS_LOCAL_WRITE);
  if (!mr) return mr.error();
  mr_ = std::move(mr).value();
  ibv_srq_init_attr attr{};
  attr.attr.max_wr = blocks_;
  attr.attr.max_sge = 1;
  srq_ = ibv_create_srq(pd_->get(), &attr);
  if (srq_ == nullptr) return errno_code(errno != 0 ? errno : ENOMEM);
  for (std::uint32_t i = 0; i < blocks_; ++i) {
    if (const int rc = post(i); rc != 0) return errno_code(rc);
  }
  // The alarm (docs/protocol.md): fewer posted receives than the low-water mark. Our own
  // count of posted blocks raises it as completions are reaped (on_taken); the device's
  // SRQ_LIMIT event is armed too, so that a pool read by no stream still shows up in the
  // device's event counters.
  if (config.low_water != 0) {
    ibv_srq_attr limit{};
    limit.srq_limit = config.low_water;
    if (const int rc = ibv_modify_srq(srq_, &limit, IBV_SRQ_LIMIT); rc != 0) {
      RMSG_LOG(info, "rdma: SRQ limit not armed: %d", rc);
    }
  }
  RMSG_LOG(debug, "rdma: shared receive pool of %u x %u bytes on %s", blocks_, block_size_,
           ibv_get_device_name(ctx->device));
  return {};
}

SharedReceive::~SharedReceive() {
  if (srq_ != nullptr) ibv_destroy_srq(srq_);
  mr_.reset();
}

int SharedReceive::post(std::uint32_t i) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(block(i)), block_size_, mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wire::make_wr_id(kPoolGeneration, wire::WrKind::recv, i);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_srq_recv(srq_, &wr, &bad);
  if (rc == 0) {
    ++posted_;
    if (budget_.on_posted_level(posted_)) {
      ibv_srq_attr limit{};
      limit.srq_limit = budget_.config().low_water;
      ibv_modify_srq(srq_, &limit, IBV_SRQ_LIMIT);  // re-armed: best effort
    }
  }
  return rc;
}

const CounterSet& SharedReceive::counters() {
  set_.counter("srq_admit_refused").set(budget_.refused());
  set_.counter("srq_alarms").set(budget_.alarms());
  set_.counter("srq_blocks").set(blocks_);
  set_.counter("srq_leased").set(budget_.leased());
  return set_;
}

}  // namespace rmsg::rdma
