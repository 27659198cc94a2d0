#include "kit/raw_peer.h"

#include <arpa/inet.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace rmsg::testing {

RawClient::~RawClient() {
  if (connected_) rdma_disconnect(id_);
  if (id_ != nullptr && id_->qp != nullptr) rdma_destroy_qp(id_);
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (id_ != nullptr) rdma_destroy_id(id_);
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
}

int RawClient::wait_event(rdma_cm_event_type* type) {
  pollfd p{channel_->fd, POLLIN, 0};
  if (poll(&p, 1, 15000) != 1) {
    error = "timed out waiting for a CM event";
    return -1;
  }
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(channel_, &ev) != 0) {
    error = std::string("rdma_get_cm_event: ") + std::strerror(errno);
    return -1;
  }
  *type = ev->event;
  reject_status = ev->status;
  const auto& conn = ev->param.conn;
  const auto* pd = static_cast<const std::byte*>(conn.private_data);
  event_data.assign(pd, pd == nullptr ? pd : pd + conn.private_data_len);
  rdma_ack_cm_event(ev);
  return 0;
}

int RawClient::connect(const SocketAddress& server, std::span<const std::byte> private_data) {
  rdma_cm_event_type type{};
  channel_ = rdma_create_event_channel();
  if (channel_ == nullptr || rdma_create_id(channel_, &id_, nullptr, RDMA_PS_TCP) != 0) {
    error = std::string("create: ") + std::strerror(errno);
    return -1;
  }
  SocketAddress dst = server;
  if (rdma_resolve_addr(id_, nullptr, dst.sockaddr_ptr(), 2000) != 0 || wait_event(&type) != 0 ||
      type != RDMA_CM_EVENT_ADDR_RESOLVED) {
    error += " (resolve addr)";
    return -1;
  }
  if (rdma_resolve_route(id_, 2000) != 0 || wait_event(&type) != 0 ||
      type != RDMA_CM_EVENT_ROUTE_RESOLVED) {
    error += " (resolve route)";
    return -1;
  }
  pd_ = ibv_alloc_pd(id_->verbs);
  cq_ = ibv_create_cq(id_->verbs, 64, nullptr, nullptr, 0);
  // An int, the type ibv_reg_mr takes: its macro ANDs `access` with IBV_ACCESS_OPTIONAL_RANGE,
  // an enumerator of another enum, which C++20 deprecates for two enum operands.
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE;
  mr_ = pd_ ? ibv_reg_mr(pd_, buf_.data(), buf_.size(), kAccess) : nullptr;
  ibv_qp_init_attr attr{};
  attr.send_cq = attr.recv_cq = cq_;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = 16;
  attr.cap.max_recv_wr = 16;
  attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
  if (cq_ == nullptr || mr_ == nullptr || rdma_create_qp(id_, pd_, &attr) != 0) {
    error = std::string("resources: ") + std::strerror(errno);
    return -1;
  }
  for (int i = 0; i < 16; ++i) {  // room for whatever the rmsg side sends back
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf_.data()) + i * 16384u, 16384, mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = 1000 + i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(id_->qp, &wr, &bad) != 0) return -1;
  }
  rdma_conn_param param{};
  param.private_data = private_data.data();
  param.private_data_len = static_cast<std::uint8_t>(private_data.size());
  param.responder_resources = param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 0;
  if (rdma_connect(id_, &param) != 0 || wait_event(&type) != 0) {
    error += " (connect)";
    return -1;
  }
  connected_ = type == RDMA_CM_EVENT_ESTABLISHED;
  return type;
}

int RawClient::send(std::size_t len, std::uint32_t imm_host_order) {
  const std::size_t offset = buf_.size() / 2;
  for (std::size_t i = 0; i < len; ++i) buf_[offset + i] = static_cast<std::byte>(i * 7);
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf_.data() + offset),
              static_cast<std::uint32_t>(len), mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(imm_host_order);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(id_->qp, &wr, &bad); rc != 0) {
    error = std::string("ibv_post_send: ") + std::strerror(rc);
    return -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq_, 1, &wc);
    if (n < 0) return -1;
    if (n == 1 && wc.wr_id == 1) return wc.status;
  }
  error = "timed out waiting for the send completion";
  return -1;
}

}  // namespace rmsg::testing
