// ConnResources: the connection structure of one RDMA stream (S2.2) — PD, a send and a
// receive completion channel and CQ, the registered send and receive rings, and the
// application-owned RC QP — and the seam through which a stream obtains and gives back
// one (ResourceHooks), so that a connection manager can hand out recycled structures.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "rmsg/rdma.h"
#include "rmsg/result.h"
#include "verbs/verbs.h"

namespace rmsg::rdma {

struct Geometry {
  std::uint32_t send_block_size = 0;
  std::uint32_t send_block_count = 0;
  std::uint32_t recv_block_size = 0;
  std::uint32_t recv_block_count = 0;
  std::uint32_t inline_size = 0;  // requested

  // Send queue: a WR per send block plus room for two control messages.
  std::uint32_t sq_depth() const noexcept { return send_block_count + 2; }
  friend bool operator==(const Geometry&, const Geometry&) = default;
};

// Errc::invalid_argument when the options' geometry is out of the documented limits.
Result<Geometry> geometry_from(const RdmaOptions& options);

struct ConnResources {
  // Declaration order is construction order; teardown runs in reverse: QP, MRs, the ring
  // memory they cover, CQs (acking their events), completion channels, PD.
  ibv_context* context = nullptr;  // librdmacm's: never closed here
  verbs::Pd pd;
  verbs::CompChannel send_channel;
  verbs::CompChannel recv_channel;
  verbs::Cq send_cq;  // depth sq_depth: every send WR may complete (or flush)
  verbs::Cq recv_cq;  // depth recv_block_count
  verbs::Buffer send_ring;
  verbs::Buffer recv_ring;
  verbs::Mr send_mr;
  verbs::Mr recv_mr;
  verbs::Qp qp;

  Geometry geometry;
  std::uint32_t inline_granted = 0;
  // Bumped on every use; carried in wr_ids so a completion of an earlier use is stale.
  std::uint16_t generation = 0;

  std::byte* send_block(std::uint32_t i) const noexcept {
    return send_ring.get() + static_cast<std::size_t>(i) * geometry.send_block_size;
  }
  std::byte* recv_block(std::uint32_t i) const noexcept {
    return recv_ring.get() + static_cast<std::size_t>(i) * geometry.recv_block_size;
  }
};

// Builds a fresh structure on `ctx` (QP in RESET). The inline size is probed downwards
// from the requested one when the device refuses it.
Result<std::unique_ptr<ConnResources>> create_conn_resources(ibv_context* ctx,
                                                             const Geometry& geometry);

// The one seam where a connection's resources are obtained (at ROUTE_RESOLVED on the
// active side, at CONNECT_REQUEST on the passive side) and given back when the stream is
// closed. `reusable` is false when the QP failed (a failed QP must not be reused).
struct ResourceHooks {
  std::function<Result<std::unique_ptr<ConnResources>>(ibv_context*, const Geometry&)> acquire;
  std::function<void(std::unique_ptr<ConnResources>, bool reusable)> release;  // {}: destroy
};
ResourceHooks default_resource_hooks();

}  // namespace rmsg::rdma
