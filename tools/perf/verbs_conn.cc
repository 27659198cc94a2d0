#include "verbs_conn.h"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>

namespace rmsg::perf {
namespace {

constexpr int kCmTimeoutMs = 5000;
constexpr std::uint32_t kSendDepth = 128;

std::error_code last_errno() {
  return errno_code(errno != 0 ? errno : EIO);
}

// Waits (blocking) for the next CM event on `ch`; checks its type.
Result<void> expect_event(rdma_event_channel* ch, rdma_cm_event_type want) {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) return last_errno();
  const auto got = ev->event;
  const int status = ev->status;
  rdma_ack_cm_event(ev);
  if (got == want) return {};
  if (got == RDMA_CM_EVENT_REJECTED) return Errc::connection_refused;
  return status == -ETIMEDOUT ? Errc::timeout : Errc::unreachable;
}

}  // namespace

VerbsConn::VerbsConn(bool busy_poll, std::uint32_t recv_depth, std::size_t msg_size)
    : busy_(busy_poll), recv_depth_(recv_depth), size_(msg_size) {}

VerbsConn::~VerbsConn() {
  if (id_ != nullptr) {
    rdma_disconnect(id_);
    if (id_->qp != nullptr) rdma_destroy_qp(id_);
  }
  if (send_mr_) ibv_dereg_mr(send_mr_);
  if (recv_mr_) ibv_dereg_mr(recv_mr_);
  if (cq_) {
    if (unacked_) ibv_ack_cq_events(cq_, unacked_);
    ibv_destroy_cq(cq_);
  }
  if (comp_) ibv_destroy_comp_channel(comp_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (id_) rdma_destroy_id(id_);
  if (own_channel_ && channel_) rdma_destroy_event_channel(channel_);
}

Result<void> VerbsConn::build(ibv_context* ctx) {
  if ((pd_ = ibv_alloc_pd(ctx)) == nullptr) return last_errno();
  if ((comp_ = ibv_create_comp_channel(ctx)) == nullptr) return last_errno();
  const int depth = static_cast<int>(kSendDepth + recv_depth_ + 1);
  if ((cq_ = ibv_create_cq(ctx, depth, nullptr, comp_, 0)) == nullptr) return last_errno();
  send_buf_.assign(size_, std::byte{0x5a});
  recv_buf_.resize(size_ * recv_depth_);
  send_mr_ = ibv_reg_mr(pd_, send_buf_.data(), send_buf_.size(), 0);
  // An int, the type ibv_reg_mr takes: its macro ANDs `access` with IBV_ACCESS_OPTIONAL_RANGE,
  // an enumerator of another enum, which C++20 deprecates for two enum operands.
  constexpr int kRecvAccess = IBV_ACCESS_LOCAL_WRITE;
  recv_mr_ = ibv_reg_mr(pd_, recv_buf_.data(), recv_buf_.size(), kRecvAccess);
  if (send_mr_ == nullptr || recv_mr_ == nullptr) return last_errno();
  ibv_qp_init_attr attr{};
  attr.send_cq = cq_;
  attr.recv_cq = cq_;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = kSendDepth;
  attr.cap.max_recv_wr = recv_depth_;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  for (std::uint32_t want = 256;; want /= 2) {  // the stream's default inline request
    attr.cap.max_inline_data = want;
    if (rdma_create_qp(id_, pd_, &attr) == 0) break;
    if (want == 0) return last_errno();
  }
  inline_ = attr.cap.max_inline_data;
  for (std::uint32_t i = 0; i < recv_depth_; ++i) RMSG_TRY(post_recv(i));
  if (ibv_req_notify_cq(cq_, 0) != 0) return last_errno();
  return {};
}

Result<void> VerbsConn::connect(const SocketAddress& peer, const void* data, std::uint8_t len) {
  if ((channel_ = rdma_create_event_channel()) == nullptr) return last_errno();
  own_channel_ = true;
  if (rdma_create_id(channel_, &id_, nullptr, RDMA_PS_TCP) != 0) return last_errno();
  SocketAddress dst = peer;
  if (rdma_resolve_addr(id_, nullptr, dst.sockaddr_ptr(), kCmTimeoutMs) != 0) return last_errno();
  RMSG_TRY(expect_event(channel_, RDMA_CM_EVENT_ADDR_RESOLVED));
  if (rdma_resolve_route(id_, kCmTimeoutMs) != 0) return last_errno();
  RMSG_TRY(expect_event(channel_, RDMA_CM_EVENT_ROUTE_RESOLVED));
  RMSG_TRY(build(id_->verbs));
  rdma_conn_param p{};
  p.private_data = data;
  p.private_data_len = len;
  p.retry_count = 7;
  p.rnr_retry_count = 7;  // the device retries while the server re-posts (ib_send_bw)
  if (rdma_connect(id_, &p) != 0) return last_errno();
  return expect_event(channel_, RDMA_CM_EVENT_ESTABLISHED);
}

Result<void> VerbsConn::accept(rdma_cm_id* id) {
  id_ = id;
  // Its own channel: a disconnect then wakes this connection only.
  if ((channel_ = rdma_create_event_channel()) == nullptr) return last_errno();
  own_channel_ = true;
  if (rdma_migrate_id(id_, channel_) != 0) return last_errno();
  RMSG_TRY(build(id_->verbs));
  rdma_conn_param p{};
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  if (rdma_accept(id_, &p) != 0) return last_errno();
  RMSG_TRY(expect_event(channel_, RDMA_CM_EVENT_ESTABLISHED));
  // The RNR NAKs this side sends tell the sender how long to wait; rdma_cm leaves the
  // timer at 0, which means 655 ms: a receiver a moment behind (verbs-window with small
  // messages) stalled a round for seconds. 12 is 0.64 ms, perftest's value.
  ibv_qp_attr attr{};
  attr.min_rnr_timer = 12;
  if (const int rc = ibv_modify_qp(id_->qp, &attr, IBV_QP_MIN_RNR_TIMER); rc != 0) {
    return errno_code(rc);
  }
  return {};
}

Result<void> VerbsConn::post_send(std::size_t len, bool signaled) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(send_buf_.data()), static_cast<std::uint32_t>(len),
              send_mr_->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  unsigned flags = signaled ? unsigned{IBV_SEND_SIGNALED} : 0u;
  if (len <= inline_) flags |= IBV_SEND_INLINE;
  wr.send_flags = flags;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(id_->qp, &wr, &bad); rc != 0) return errno_code(rc);
  return {};
}

Result<void> VerbsConn::post_recv(std::uint32_t slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(recv_buf_.data() + slot * size_),
              static_cast<std::uint32_t>(size_), recv_mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(id_->qp, &wr, &bad); rc != 0) return errno_code(rc);
  return {};
}

Result<int> VerbsConn::wait(ibv_wc* wc, int max) {
  for (;;) {
    const int n = ibv_poll_cq(cq_, max, wc);
    if (n < 0) return Errc::device_error;
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) return std::error_code(EIO, std::system_category());
    }
    if (n > 0) return n;
    if (busy_) {
      pollfd cm{channel_->fd, POLLIN, 0};
      if ((++spins_ & 4095) == 0 && poll(&cm, 1, 0) > 0) return Errc::peer_closed;
      continue;
    }
    // Sleep on the completion channel, and on the CM channel for the peer's disconnect.
    pollfd fds[2] = {{comp_->fd, POLLIN, 0}, {channel_->fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return last_errno();
    if (fds[1].revents != 0) return Errc::peer_closed;
    ibv_cq* ev_cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(comp_, &ev_cq, &ctx) != 0) return last_errno();
    if (++unacked_ >= 64) {
      ibv_ack_cq_events(cq_, unacked_);
      unacked_ = 0;
    }
    if (ibv_req_notify_cq(cq_, 0) != 0) return last_errno();
  }
}

}  // namespace rmsg::perf
