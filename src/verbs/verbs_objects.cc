// Owners of verbs objects: PD, completion channel, CQ, QP, MR, ring memory.
#include <fcntl.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rmsg/log.h"
#include "rmsg/rdma_errors.h"
#include "verbs/seams.h"
#include "verbs/verbs.h"

namespace rmsg::verbs {
namespace {

// `create()`, unless an injected fault (verbs/seams.h) fails this call: then null with
// errno set, as rdma-core fails.
template <class Create>
auto or_fault(VerbsCall call, Create create) -> decltype(create()) {
  if (const int err = detail::take_verbs_fault(call); err != 0) {
    errno = err;
    return nullptr;
  }
  return create();
}

}  // namespace

namespace detail {

std::atomic<VerbsFaultHook> verbs_fault_hook{nullptr};

void dealloc_pd(ibv_pd* pd) {
  if (const int rc = ibv_dealloc_pd(pd); rc != 0) RMSG_LOG(warn, "ibv_dealloc_pd: %d", rc);
}
void destroy_comp_channel(ibv_comp_channel* ch) {
  if (const int rc = ibv_destroy_comp_channel(ch); rc != 0) {
    RMSG_LOG(warn, "ibv_destroy_comp_channel: %d", rc);
  }
}
void destroy_qp(ibv_qp* qp) {
  if (const int rc = ibv_destroy_qp(qp); rc != 0) RMSG_LOG(warn, "ibv_destroy_qp: %d", rc);
}
void dereg_mr(ibv_mr* mr) {
  if (const int rc = ibv_dereg_mr(mr); rc != 0) RMSG_LOG(warn, "ibv_dereg_mr: %d", rc);
}
void free_buffer(std::byte* p) {
  std::free(p);
}  // NOLINT: posix_memalign memory

}  // namespace detail

Cq& Cq::operator=(Cq&& o) noexcept {
  if (this != &o) {
    reset();
    cq_ = std::exchange(o.cq_, nullptr);
    unacked_ = std::exchange(o.unacked_, 0);
  }
  return *this;
}

void Cq::note_events(unsigned n) noexcept {
  unacked_ += n;
  if (unacked_ >= 64) {
    ibv_ack_cq_events(cq_, unacked_);
    unacked_ = 0;
  }
}

void Cq::reset() noexcept {
  if (cq_ == nullptr) return;
  if (unacked_ != 0) ibv_ack_cq_events(cq_, unacked_);
  unacked_ = 0;
  if (const int rc = ibv_destroy_cq(std::exchange(cq_, nullptr)); rc != 0) {
    RMSG_LOG(warn, "ibv_destroy_cq: %d", rc);
  }
}

Result<Pd> alloc_pd(ibv_context* ctx) {
  Pd pd(or_fault(VerbsCall::alloc_pd, [&] { return ibv_alloc_pd(ctx); }));
  if (!pd) return errno_code(errno != 0 ? errno : ENOMEM);
  return pd;
}

Result<CompChannel> create_comp_channel(ibv_context* ctx) {
  CompChannel ch(
      or_fault(VerbsCall::create_comp_channel, [&] { return ibv_create_comp_channel(ctx); }));
  if (!ch) return errno_code(errno != 0 ? errno : ENOMEM);
  const int flags = fcntl(ch->fd, F_GETFL);
  if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno_code(errno);
  if (fcntl(ch->fd, F_SETFD, FD_CLOEXEC) != 0) return errno_code(errno);
  return ch;
}

Result<Cq> create_cq(ibv_context* ctx, int depth, ibv_comp_channel* channel, void* cq_context) {
  Cq cq(or_fault(VerbsCall::create_cq,
                 [&] { return ibv_create_cq(ctx, depth, cq_context, channel, 0); }));
  if (!cq) return errno_code(errno != 0 ? errno : ENOMEM);
  return cq;
}

Result<Qp> create_qp(ibv_pd* pd, ibv_qp_init_attr& attr) {
  errno = 0;
  Qp qp(or_fault(VerbsCall::create_qp, [&] { return ibv_create_qp(pd, &attr); }));
  if (!qp) return errno_code(errno != 0 ? errno : EINVAL);
  return qp;
}

Result<Mr> reg_mr(ibv_pd* pd, void* addr, std::size_t len, int access) {
  Mr mr(or_fault(VerbsCall::reg_mr, [&] { return ibv_reg_mr(pd, addr, len, access); }));
  if (!mr) {
    const int err = errno != 0 ? errno : ENOMEM;
    rlimit lim{};
    // Pinning beyond RLIMIT_MEMLOCK without CAP_IPC_LOCK is the common cause; with an
    // unlimited limit ENOMEM is plain memory shortage.
    if ((err == ENOMEM || err == EPERM) && getrlimit(RLIMIT_MEMLOCK, &lim) == 0 &&
        lim.rlim_cur != RLIM_INFINITY) {
      RMSG_LOG(error, "ibv_reg_mr(%zu bytes): %s with RLIMIT_MEMLOCK %llu bytes", len,
               std::strerror(err), static_cast<unsigned long long>(lim.rlim_cur));
      return memlock_limit_error();
    }
    return errno_code(err);
  }
  return mr;
}

Result<Buffer> allocate_buffer(std::size_t len) {
  void* p = nullptr;
  if (const int rc = posix_memalign(&p, 4096, len); rc != 0) return errno_code(rc);
  std::memset(p, 0, len);
  return Buffer(static_cast<std::byte*>(p));
}

}  // namespace rmsg::verbs
