#include "rdma/resources.h"

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
  attr.cap.max_recv_wr = r.geometry.recv_block_count;
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

Result<std::unique_ptr<ConnResources>> create_conn_resources(ibv_context* ctx, const Geometry& g,
                                                             std::shared_ptr<verbs::Pd> shared_pd) {
  auto r = std::make_unique<ConnResources>();
  r->context = ctx;
  r->geometry = g;
  if (shared_pd) {
    r->pd = std::move(shared_pd);
  } else {
    auto pd = verbs::alloc_pd(ctx);
    if (!pd) return pd.error();
    r->pd = std::make_shared<verbs::Pd>(std::move(pd).value());
  }
  for (auto* ch : {&r->send_channel, &r->recv_channel}) {
    auto c = verbs::create_comp_channel(ctx);
    if (!c) return c.error();
    *ch = std::move(c).value();
  }
  auto scq = verbs::create_cq(ctx, static_cast<int>(g.sq_depth()), r->send_channel.get());
  if (!scq) return scq.error();
  r->send_cq = std::move(scq).value();
  auto rcq = verbs::create_cq(ctx, static_cast<int>(g.recv_block_count), r->recv_channel.get());
  if (!rcq) return rcq.error();
  r->recv_cq = std::move(rcq).value();
  const std::size_t send_len = std::size_t{g.send_block_size} * g.send_block_count;
  const std::size_t recv_len = std::size_t{g.recv_block_size} * g.recv_block_count;
  auto sbuf = verbs::allocate_buffer(send_len);
  if (!sbuf) return sbuf.error();
  r->send_ring = std::move(sbuf).value();
  auto rbuf = verbs::allocate_buffer(recv_len);
  if (!rbuf) return rbuf.error();
  r->recv_ring = std::move(rbuf).value();
  // The peer only SENDs: no remote access to either ring.
  auto smr = verbs::reg_mr(r->pd->get(), r->send_ring.get(), send_len, 0);
  if (!smr) return smr.error();
  r->send_mr = std::move(smr).value();
  auto rmr = verbs::reg_mr(r->pd->get(), r->recv_ring.get(), recv_len, IBV_ACCESS_LOCAL_WRITE);
  if (!rmr) return rmr.error();
  r->recv_mr = std::move(rmr).value();
  auto qp = create_qp_probing_inline(*r);
  if (!qp) return qp.error();
  r->qp = std::move(qp).value();
  RMSG_LOG(debug, "rdma resources: qp %u, inline %u, rings %zu+%zu bytes", r->qp->qp_num,
           r->inline_granted, send_len, recv_len);
  return r;
}

ResourceHooks default_resource_hooks() {
  ResourceHooks hooks;
  hooks.acquire = [](rdma_cm_id* id, const Geometry& g) {
    return create_conn_resources(id->verbs, g);
  };
  return hooks;
}

}  // namespace rmsg::rdma
