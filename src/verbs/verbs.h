// verbs/: move-only RAII owners for the rdma-core objects rmsg uses, each created by a
// factory named after the C call it wraps and returning Result.
//
// Teardown order is the caller's member declaration order (members are destroyed in
// reverse): QP, then MRs, then the buffers they cover, then CQs, then completion channels,
// then the PD. Rules the owners enforce:
//   - a CmEvent acks its rdma_cm event when destroyed; rdma_destroy_id blocks until every
//     event reported for that id is acked, so ids are destroyed only after their events
//     (cm/CmChannel::retire does that for ids destroyed while an event is dispatched);
//   - a Cq acks the completion events it counted before ibv_destroy_cq;
//   - the device context (id->verbs) belongs to librdmacm and is never closed here.
//
// Threading: none of these objects is thread-safe; each is used from one loop thread.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "rmsg/result.h"

namespace rmsg::verbs {

// A move-only owner of T*, released with Destroy.
template <class T, void (*Destroy)(T*)>
class Owner {
 public:
  Owner() = default;
  explicit Owner(T* p) noexcept : p_(p) {}
  Owner(Owner&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Owner& operator=(Owner&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  ~Owner() { reset(); }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  T* release() noexcept { return std::exchange(p_, nullptr); }
  void reset() noexcept {
    if (p_ != nullptr) Destroy(std::exchange(p_, nullptr));
  }

 private:
  T* p_ = nullptr;
};

namespace detail {
void destroy_event_channel(rdma_event_channel* ch);
void destroy_id(rdma_cm_id* id);
void ack_cm_event(rdma_cm_event* ev);
void dealloc_pd(ibv_pd* pd);
void destroy_comp_channel(ibv_comp_channel* ch);
void destroy_qp(ibv_qp* qp);
void dereg_mr(ibv_mr* mr);
void free_buffer(std::byte* p);
}  // namespace detail

using EventChannel = Owner<rdma_event_channel, detail::destroy_event_channel>;
using CmId = Owner<rdma_cm_id, detail::destroy_id>;
using CmEvent = Owner<rdma_cm_event, detail::ack_cm_event>;
using Pd = Owner<ibv_pd, detail::dealloc_pd>;
using CompChannel = Owner<ibv_comp_channel, detail::destroy_comp_channel>;
using Qp = Owner<ibv_qp, detail::destroy_qp>;
using Mr = Owner<ibv_mr, detail::dereg_mr>;
using Buffer = Owner<std::byte, detail::free_buffer>;

// A CQ plus the count of completion events read from its channel and not yet acked;
// the destructor acks them, then destroys the CQ.
class Cq {
 public:
  Cq() = default;
  explicit Cq(ibv_cq* cq) noexcept : cq_(cq) {}
  Cq(Cq&& o) noexcept
      : cq_(std::exchange(o.cq_, nullptr)), unacked_(std::exchange(o.unacked_, 0)) {}
  Cq& operator=(Cq&& o) noexcept;
  Cq(const Cq&) = delete;
  Cq& operator=(const Cq&) = delete;
  ~Cq() { reset(); }

  ibv_cq* get() const noexcept { return cq_; }
  explicit operator bool() const noexcept { return cq_ != nullptr; }
  // Counts events taken with ibv_get_cq_event; acks in batches (acking takes a lock).
  void note_events(unsigned n) noexcept;
  void reset() noexcept;

 private:
  ibv_cq* cq_ = nullptr;
  unsigned unacked_ = 0;
};

// rdma_create_event_channel, with its fd made non-blocking (the loop watches it).
Result<EventChannel> create_event_channel();
// rdma_create_id on `channel` (RDMA_PS_TCP: reliable connected).
Result<CmId> create_id(rdma_event_channel* channel, void* context);
// rdma_get_cm_event; Errc::would_block when none is queued.
Result<CmEvent> get_cm_event(rdma_event_channel* channel);

Result<Pd> alloc_pd(ibv_context* ctx);
// ibv_create_comp_channel, fd non-blocking.
Result<CompChannel> create_comp_channel(ibv_context* ctx);
// ibv_create_cq; `cq_context` comes back with each of its channel's events.
Result<Cq> create_cq(ibv_context* ctx, int depth, ibv_comp_channel* channel,
                     void* cq_context = nullptr);
// ibv_create_qp; `attr.cap` is updated with what the device granted.
Result<Qp> create_qp(ibv_pd* pd, ibv_qp_init_attr& attr);
// ibv_reg_mr. ENOMEM/EPERM under a finite RLIMIT_MEMLOCK: rmsg::memlock_limit_error().
Result<Mr> reg_mr(ibv_pd* pd, void* addr, std::size_t len, int access);
// Page-aligned, zeroed memory for a registered ring.
Result<Buffer> allocate_buffer(std::size_t len);

// An errno-style return of a verbs call (0 or errno) as a Result.
inline Result<void> check_rc(int rc) {
  if (rc == 0) return {};
  return errno_code(rc);
}

// True when some RDMA device has a port in ACTIVE state (perf's transport=auto).
bool any_active_port();

}  // namespace rmsg::verbs
