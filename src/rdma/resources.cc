#include "rdma/resources.h"

#include <algorithm>
#include <cerrno>

#include "rdma/wire.h"
#include "rmsg/log.h"

namespace rmsg::rdma {
namespace {

constexpr std::uint32_t kMinBlock = 64;
constexpr std::uint32_t kMaxBlock = 16u << 20;
constexpr std::uint32_t kMaxBlocks = 4096;
constexpr std::uint32_t kMaxInline = 4096;

bool block_ok(std::uint32_t size) {
  return size >= kMinBlock && size <= kMaxBlock;
}

Result<verbs::Qp> create_qp_probing_inline(ConnResources& r) {
  ibv_qp_init_attr attr{};
  attr.send_cq = r.send_cq.get();
  attr.recv_cq = r.recv_cq.get();
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;  // selective signalling
  attr.cap.max_send_wr = r.geometry.sq_depth();
  attr.srq = r.srq;
  attr.cap.max_recv_wr = r.srq != nullptr ? 0 : r.geometry.recv_block_count;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  // Devices do not report their inline limit (rxe: 512; more fails with EINVAL): halve
  // the request until the QP is created. Any other error is not about the inline size.
  for (std::uint32_t want = r.geometry.inline_size;; want /= 2) {
    attr.cap.max_inline_data = want;
    auto qp = verbs::create_qp(r.pd->get(), attr);
    if (qp || want == 0 || qp.error() != std::errc::invalid_argument) {
      if (qp) r.inline_granted = attr.cap.max_inline_data;
      return qp;
    }
  }
}

}  // namespace

Result<Geometry> geometry_from(const RdmaOptions& o) {
  if (!block_ok(o.send_block_size) || !block_ok(o.recv_block_size) || o.send_block_count < 1 ||
      o.send_block_count > kMaxBlocks || o.recv_block_count < wire::kMinRecvBlocks ||
      o.recv_block_count > kMaxBlocks || o.inline_size > kMaxInline || o.retry_count > 7 ||
      o.rnr_retry_count > 7 || o.ack_timeout > 31) {
    return Errc::invalid_argument;
  }
  return Geometry{o.send_block_size, o.send_block_count, o.recv_block_size, o.recv_block_count,
                  o.inline_size};
}

ResourceBuilder::ResourceBuilder(EventLoop& loop, ibv_context* ctx, const Geometry& g,
                                 std::shared_ptr<verbs::Pd> shared_pd, ibv_srq* srq)
    : loop_(loop), r_(std::make_unique<ConnResources>()) {
  r_->context = ctx;
  r_->srq = srq;
  r_->geometry = g;
  r_->pd = std::move(shared_pd);
}

// One object per call, in construction order (ConnResources' declaration order).
Result<bool> ResourceBuilder::step() {
  ConnResources& r = *r_;
  const Geometry& g = r.geometry;
  const std::size_t send_len = std::size_t{g.send_block_size} * g.send_block_count;
  const std::size_t recv_len = std::size_t{g.recv_block_size} * g.recv_block_count;
  const int step = next_++;
  switch (step) {
    case 0:
      if (!r.pd) {
        auto pd = verbs::alloc_pd(r.context);
        if (!pd) return pd.error();
        r.pd = std::make_shared<verbs::Pd>(std::move(pd).value());
      }
      return false;
    case 1: {  // the loop's channel: made once per device, shared afterwards
      auto c = CompletionChannel::for_loop(loop_, r.context);
      if (!c) return c.error();
      r.channel = std::move(c).value();
      return false;
    }
    case 2: {
      auto cq = verbs::create_cq(r.context, static_cast<int>(g.sq_depth()), r.channel->get(),
                                 &r.send_sink);
      if (!cq) return cq.error();
      r.send_cq = std::move(cq).value();
      return false;
    }
    case 3: {
      const auto depth = std::max(g.recv_block_count, g.recv_window);
      auto cq =
          verbs::create_cq(r.context, static_cast<int>(depth), r.channel->get(), &r.recv_sink);
      if (!cq) return cq.error();
      r.recv_cq = std::move(cq).value();
      return false;
    }
    case 4:
    case 5: {
      if (step == 5 && r.srq != nullptr) return false;  // receives from the pool
      auto buf = verbs::allocate_buffer(step == 4 ? send_len : recv_len);
      if (!buf) return buf.error();
      (step == 4 ? r.send_ring : r.recv_ring) = std::move(buf).value();
      return false;
    }
    case 6: {
      // The peer only SENDs: no remote access to either ring.
      auto mr = verbs::reg_mr(r.pd->get(), r.send_ring.get(), send_len, 0);
      if (!mr) return mr.error();
      r.send_mr = std::move(mr).value();
      return false;
    }
    case 7: {
      if (r.srq != nullptr) return false;
      auto mr = verbs::reg_mr(r.pd->get(), r.recv_ring.get(), recv_len, IBV_ACCESS_LOCAL_WRITE);
      if (!mr) return mr.error();
      r.recv_mr = std::move(mr).value();
      return false;
    }
    default: {
      auto qp = create_qp_probing_inline(r);
      if (!qp) return qp.error();
      r.qp = std::move(qp).value();
      RMSG_LOG(debug, "rdma resources: qp %u, inline %u, rings %zu+%zu bytes", r.qp->qp_num,
               r.inline_granted, send_len, recv_len);
      return true;
    }
  }
}

Result<std::unique_ptr<ConnResources>> create_conn_resources(EventLoop& loop, ibv_context* ctx,
                                                             const Geometry& g,
                                                             std::shared_ptr<verbs::Pd> shared_pd,
                                                             ibv_srq* srq) {
  ResourceBuilder b(loop, ctx, g, std::move(shared_pd), srq);
  for (;;) {
    auto done = b.step();
    if (!done) return done.error();
    if (done.value()) return b.take();
  }
}

// Teardown order (the reverse of construction): the QP, the MRs, the ring memory, the
// CQs (the channel reference with the last); the PD goes with the last structure that
// shares it.
bool release_one(ConnResources& r) {
  auto drop = [](auto& owner) {
    if (!owner) return false;
    owner.reset();
    return true;
  };
  if (drop(r.qp) || drop(r.recv_mr) || drop(r.send_mr) || drop(r.recv_ring) || drop(r.send_ring) ||
      drop(r.recv_cq)) {
    return true;
  }
  const bool last = drop(r.send_cq);
  r.channel.reset();  // no system call unless it was the device's last structure
  return last;
}

ResourceHooks default_resource_hooks(EventLoop& loop) {
  ResourceHooks hooks;
  hooks.acquire = [&loop](rdma_cm_id* id, const Geometry& g) {
    return create_conn_resources(loop, id->verbs, g);
  };
  return hooks;
}

}  // namespace rmsg::rdma
