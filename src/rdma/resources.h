// ConnResources: the connection structure of one RDMA stream (S2.2) — PD, a send and a
// receive CQ on the loop's completion channel for the device (CompletionChannel), the
// registered send and receive rings, and the application-owned RC QP — and the seam through which a
// stream obtains and gives back one (ResourceHooks), so that a connection manager can hand out
// recycled structures.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "base/lease.h"
#include "rdma/completion_channel.h"
#include "rdma/wire.h"
#include "rdmacm/cm_connection.h"
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
  // Shared receive (srq/shared_receive.h): receives come from the loop's pool, up to
  // recv_window of them may complete at once (the receive CQ's depth); 0: own ring.
  std::uint32_t recv_window = 0;

  // Send queue: a WR per send block plus room for two control messages.
  std::uint32_t sq_depth() const noexcept { return send_block_count + 2; }
  friend bool operator==(const Geometry&, const Geometry&) = default;
};

// Errc::invalid_argument when the options' geometry is out of the documented limits.
Result<Geometry> geometry_from(const RdmaOptions& options);

struct ConnResources {
  // Declaration order is construction order; teardown runs in reverse: QP, MRs, the ring
  // memory they cover, CQs (acking their events), the event sinks, the loop's completion
  // channel (shared: closed with the last structure on it), PD.
  ibv_context* context = nullptr;              // librdmacm's: never closed here
  std::shared_ptr<verbs::Pd> pd;               // one per device context under a connection manager
  std::shared_ptr<CompletionChannel> channel;  // the loop's for this device
  // The CQs' cq_context: the current owner sets the handler (RdmaStream, Recycler).
  CqEventSink send_sink;
  CqEventSink recv_sink;
  verbs::Cq send_cq;  // depth sq_depth: every send WR may complete (or flush)
  verbs::Cq recv_cq;  // depth recv_block_count
  verbs::Buffer send_ring;
  verbs::Buffer recv_ring;
  verbs::Mr send_mr;
  verbs::Mr recv_mr;
  verbs::Qp qp;
  // The pool's SRQ the QP takes its receives from (no receive ring then); null: its own.
  ibv_srq* srq = nullptr;

  Geometry geometry;
  std::uint32_t inline_granted = 0;
  // Bumped on every use (next_generation); carried in wr_ids so a completion of an earlier
  // use is stale. 0 only before the first use.
  std::uint16_t generation = 0;
  // The connection manager's number for this structure (0 outside a manager; a manager's
  // serials skip 0 when they wrap).
  std::uint16_t serial = 0;
  // Receives posted in the current generation whose completion nobody has polled yet:
  // recycling reaps exactly this many (flushed) receive completions.
  std::uint32_t recv_posted = 0;

  // The hello's epoch (docs/protocol.md): which structure, which use of it.
  std::uint32_t epoch() const noexcept {
    return (std::uint32_t{serial} << 16) | std::uint32_t{generation};
  }

  std::byte* send_block(std::uint32_t i) const noexcept {
    return send_ring.get() + static_cast<std::size_t>(i) * geometry.send_block_size;
  }
  std::byte* recv_block(std::uint32_t i) const noexcept {
    return recv_ring.get() + static_cast<std::size_t>(i) * geometry.recv_block_size;
  }
};

// The generation of a structure's next use. Comparing 16-bit generations for equality is
// enough across their wrap because a structure is reused only after the Recycler reaped
// every completion of its previous use (the flushed marker after all sends, exactly
// recv_posted receives): a CQ never holds completions of more than the previous use, so
// only two consecutive generations ever meet, and those always differ. 0 is skipped so
// that it keeps meaning "never used".
constexpr std::uint16_t next_generation(std::uint16_t g) noexcept {
  return g == 0xFFFF ? std::uint16_t{1} : static_cast<std::uint16_t>(g + 1);
}

// A connection manager's next structure serial: 16 bits like the generation, 0 skipped too.
constexpr std::uint16_t next_serial(std::uint16_t s) noexcept {
  return next_generation(s);
}

// Builds a fresh structure for `loop` on `ctx` (QP in RESET) in the protection domain
// `pd` (a new one when null), its CQs on the loop's completion channel for the device:
// the structure serves streams of that loop only. The inline size is probed downwards
// from the requested one when the device refuses it.
// With `srq` (the shared-receive pool's, on `pd`) the QP takes its receives from it and
// the structure has no receive ring.
Result<std::unique_ptr<ConnResources>> create_conn_resources(
    EventLoop& loop, ibv_context* ctx, const Geometry& geometry,
    std::shared_ptr<verbs::Pd> pd = nullptr, ibv_srq* srq = nullptr);

// create_conn_resources one verbs object (or ring) per step(), so that a connection
// manager can build a spare between other work on its loop: each verbs call is a system
// call that can take milliseconds (rxe under emulation), a whole structure tens of them.
// step() returns true once the structure is complete (then take() it), false while
// objects remain, or the error of the object that failed (what was built is destroyed
// with the builder).
class ResourceBuilder {
 public:
  ResourceBuilder(EventLoop& loop, ibv_context* ctx, const Geometry& geometry,
                  std::shared_ptr<verbs::Pd> pd, ibv_srq* srq = nullptr);
  Result<bool> step();
  std::unique_ptr<ConnResources> take() { return std::move(r_); }
  const ConnResources& resources() const { return *r_; }
  int steps() const noexcept { return next_; }  // taken so far

 private:
  EventLoop& loop_;
  std::unique_ptr<ConnResources> r_;
  int next_ = 0;
};

// Destroys the next object of `r` in teardown order (QP, MRs, rings, CQs; the shared
// completion channel reference goes with them) and returns true, or false when only the PD
// reference is left: a structure taken apart one call at a time (StructurePool's deferred
// teardown).
bool release_one(ConnResources& r);

// What a closed stream gives back: its structure, whether it may serve again, and its
// old rdma_cm id (already disconnected and detached from the stream), which a connection
// manager keeps until TIMEWAIT_EXIT. The id must be destroyed through
// rdmacm::CmChannel::retire (it may be inside the dispatch of its own event).
struct ReleasedStructure {
  std::unique_ptr<ConnResources> res;
  // False unless the connection was established and ended without a QP failure (a clean
  // close, or the peer's disconnect): a failed QP is never reused.
  bool reusable = false;
  verbs::CmId id;
  bool timewait_exited = false;  // the old id already reported TIMEWAIT_EXIT
  // The connection ended by an error (a QP failure, the peer's disconnect without a
  // close), not by a close: a connection manager expects it to be made again soon.
  bool abnormal = false;
};

// The one seam where a connection's resources are obtained (at ROUTE_RESOLVED on the
// active side, at CONNECT_REQUEST on the passive side; `id` is the connection's id, which
// names the device and port) and given back when the stream is closed. `on_step`, when
// set, observes the connection's setup steps (rdmacm::CmConnection::set_observer): a manager
// times the phases and enforces the step deadlines with it.
struct ResourceHooks {
  std::function<Result<std::unique_ptr<ConnResources>>(rdma_cm_id* id, const Geometry&)> acquire;
  std::function<void(ReleasedStructure)> release;  // {}: destroy, the id retired at once
  rdmacm::CmConnection::Observer on_step;          // {}: the connection times itself
  // Passive side, at CONNECT_REQUEST before anything is built: a lease for the new
  // connection (held by its stream: RdmaStream::create), or nothing to reject the request
  // (the reject hello's reason `resources`). {}: every request is admitted.
  std::function<std::optional<Lease>()> admit;
  // Passive side: a request was rejected because RdmaOptions::max_inbound_handshakes
  // requests of this acceptor are in their handshake already (for counting). {}: none.
  std::function<void()> on_handshakes_full;
  // Active side: the routing value the request hello carries (wire.h, ExtType::affinity;
  // 0: none, the field is not sent).
  std::uint64_t affinity = 0;
  // Listener, at CONNECT_REQUEST once the hello is checked and before `admit`: true when
  // the hook took the request over (it then owns `request.id`, to hand it to another
  // loop after the event is acked: rdmacm::CmChannel::after_ack); false: accept it here.
  std::function<bool(const rdma_cm_event& request, const wire::Hello& hello)> route;
};
// Unmanaged structures for streams of `loop`.
ResourceHooks default_resource_hooks(EventLoop& loop);

}  // namespace rmsg::rdma
