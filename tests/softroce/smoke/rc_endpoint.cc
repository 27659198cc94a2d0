#include "softroce/smoke/rc_endpoint.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rmsg::softroce {
namespace {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

constexpr std::uint32_t kMagic = 0x52534d47;  // "RSMG"
enum Kind : std::uint64_t { kRecv = 1, kSend = 2 };

struct Header {
  std::uint32_t magic, gen, seq, dir, len;
};

std::uint64_t wr_id(std::uint32_t gen, Kind kind, int slot) {
  return (std::uint64_t{gen} << 32) | (kind << 16) | static_cast<std::uint64_t>(slot);
}
std::uint32_t wr_gen(std::uint64_t id) {
  return static_cast<std::uint32_t>(id >> 32);
}
Kind wr_kind(std::uint64_t id) {
  return static_cast<Kind>((id >> 16) & 0xffff);
}
int wr_slot(std::uint64_t id) {
  return static_cast<int>(id & 0xffff);
}

// 20..4095 bytes: most messages span several packets at rxe's 1024-byte MTU.
std::uint32_t message_len(std::uint32_t seq, std::uint32_t dir) {
  return sizeof(Header) + (seq * 397 + dir * 131) % (RcEndpoint::kSlotBytes - sizeof(Header));
}
std::uint8_t pattern(std::uint32_t gen, std::uint32_t seq, std::uint32_t dir, std::uint32_t i) {
  return static_cast<std::uint8_t>(gen * 13 + seq * 31 + dir * 101 + i * 7);
}

AssertionResult errno_failure(const char* what, int err) {
  return AssertionFailure() << what << " failed: " << std::strerror(err) << " (" << err << ")";
}

}  // namespace

RcEndpoint::~RcEndpoint() {
  if (own_qp_ && qp_) ibv_destroy_qp(qp_);
  if (srq_) ibv_destroy_srq(srq_);
  if (mr_) ibv_dereg_mr(mr_);
  if (send_cq_) ibv_destroy_cq(send_cq_);
  if (recv_cq_) ibv_destroy_cq(recv_cq_);
  if (pd_) ibv_dealloc_pd(pd_);
  std::free(buf_);
}

AssertionResult RcEndpoint::create(ibv_context* ctx, bool shared_receive) {
  if (!ctx) return AssertionFailure() << "no verbs context";
  if (!(pd_ = ibv_alloc_pd(ctx))) return errno_failure("ibv_alloc_pd", errno);
  send_cq_ = ibv_create_cq(ctx, 2 * kSlots, nullptr, nullptr, 0);
  recv_cq_ = ibv_create_cq(ctx, 2 * kSlots, nullptr, nullptr, 0);
  if (!send_cq_ || !recv_cq_) return errno_failure("ibv_create_cq", errno);
  std::size_t bytes = 2 * kSlots * kSlotBytes;
  if (posix_memalign(reinterpret_cast<void**>(&buf_), 4096, bytes) != 0) {
    return AssertionFailure() << "out of memory";
  }
  // An int, the type ibv_reg_mr takes: its macro ANDs `access` with IBV_ACCESS_OPTIONAL_RANGE,
  // an enumerator of another enum, which C++20 deprecates for two enum operands.
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE;
  mr_ = ibv_reg_mr(pd_, buf_, bytes, kAccess);
  if (!mr_) return errno_failure("ibv_reg_mr", errno);
  if (shared_receive) {
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = 2 * kSlots;
    attr.attr.max_sge = 1;
    if (!(srq_ = ibv_create_srq(pd_, &attr))) return errno_failure("ibv_create_srq", errno);
  }
  return AssertionSuccess();
}

namespace {
ibv_qp_init_attr rc_qp_attr(ibv_cq* send_cq, ibv_cq* recv_cq) {
  ibv_qp_init_attr attr{};
  attr.send_cq = send_cq;
  attr.recv_cq = recv_cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = 2 * RcEndpoint::kSlots;
  attr.cap.max_recv_wr = 2 * RcEndpoint::kSlots;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  return attr;
}
}  // namespace

AssertionResult RcEndpoint::create_qp_on(rdma_cm_id* id) {
  ibv_qp_init_attr attr = rc_qp_attr(send_cq_, recv_cq_);
  if (rdma_create_qp(id, pd_, &attr) != 0) return errno_failure("rdma_create_qp", errno);
  qp_ = id->qp;
  return AssertionSuccess();
}

AssertionResult RcEndpoint::create_own_qp() {
  ibv_qp_init_attr attr = rc_qp_attr(send_cq_, recv_cq_);
  if (srq_) {
    attr.srq = srq_;
    attr.cap.max_recv_wr = 0;
    attr.cap.max_recv_sge = 0;
  }
  if (!(qp_ = ibv_create_qp(pd_, &attr))) return errno_failure("ibv_create_qp", errno);
  own_qp_ = true;
  return AssertionSuccess();
}

void RcEndpoint::begin_generation(std::uint32_t gen) {
  gen_ = gen;
  rx_seq_ = tx_count_ = 0;
  sends_out_ = flushed_ = stale_recvs_ = 0;
  if (!srq_) recvs_posted_ = 0;  // an SRQ's receives stay posted across connections
}

char* RcEndpoint::slot_ptr(int slot, bool send) const {
  return buf_ + (static_cast<std::size_t>(slot) + (send ? kSlots : 0)) * kSlotBytes;
}

AssertionResult RcEndpoint::post_receive(int slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(slot_ptr(slot, false)), kSlotBytes, mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id(gen_, kRecv, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (srq_) {
    if (int rc = ibv_post_srq_recv(srq_, &wr, &bad)) return errno_failure("ibv_post_srq_recv", rc);
  } else if (int rc = ibv_post_recv(qp_, &wr, &bad)) {
    return errno_failure("ibv_post_recv", rc);
  }
  ++recvs_posted_;
  return AssertionSuccess();
}

AssertionResult RcEndpoint::post_all_receives() {
  if (srq_ && recvs_posted_ > 0) return AssertionSuccess();  // posted by an earlier connection
  for (int slot = 0; slot < kSlots; ++slot) {
    if (auto r = post_receive(slot); !r) return r;
  }
  return AssertionSuccess();
}

AssertionResult RcEndpoint::send(std::uint32_t seq, std::uint32_t dir) {
  if (sends_out_ >= kSlots) return AssertionFailure() << "all send slots in flight";
  int slot = static_cast<int>(tx_count_++ % kSlots);
  char* p = slot_ptr(slot, true);
  Header h{kMagic, gen_, seq, dir, message_len(seq, dir)};
  std::memcpy(p, &h, sizeof h);
  for (std::uint32_t i = sizeof h; i < h.len; ++i)
    p[i] = static_cast<char>(pattern(gen_, seq, dir, i));
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(p), h.len, mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id(gen_, kSend, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad)) return errno_failure("ibv_post_send", rc);
  ++sends_out_;
  return AssertionSuccess();
}

AssertionResult RcEndpoint::on_recv(
    const ibv_wc& wc, std::uint32_t dir,
    const std::function<AssertionResult(std::uint32_t)>& on_message) {
  --recvs_posted_;
  if (wc.status != IBV_WC_SUCCESS) {
    return AssertionFailure() << "receive completion: " << ibv_wc_status_str(wc.status);
  }
  int slot = wr_slot(wc.wr_id);
  const char* p = slot_ptr(slot, false);
  Header h;
  std::memcpy(&h, p, sizeof h);
  if (wc.opcode != IBV_WC_RECV || h.magic != kMagic || h.gen != gen_ || h.seq != rx_seq_ ||
      h.dir != dir || h.len != wc.byte_len || h.len != message_len(h.seq, dir)) {
    return AssertionFailure() << "bad message: opcode " << wc.opcode << " magic " << h.magic
                              << " gen " << h.gen << "/" << gen_ << " seq " << h.seq << "/"
                              << rx_seq_ << " dir " << h.dir << " len " << h.len << "/"
                              << wc.byte_len;
  }
  for (std::uint32_t i = sizeof h; i < h.len; ++i) {
    if (static_cast<std::uint8_t>(p[i]) != pattern(gen_, h.seq, dir, i)) {
      return AssertionFailure() << "payload of message " << h.seq << " differs at byte " << i;
    }
  }
  ++rx_seq_;
  if (auto r = post_receive(slot); !r) return r;
  return on_message(h.seq);
}

AssertionResult RcEndpoint::poll(std::uint32_t expect_dir,
                                 const std::function<AssertionResult(std::uint32_t)>& on_message) {
  ibv_wc wc[kSlots];
  int n = ibv_poll_cq(recv_cq_, kSlots, wc);
  if (n < 0) return AssertionFailure() << "ibv_poll_cq(recv) failed";
  for (int i = 0; i < n; ++i) {
    if (!srq_ && wr_gen(wc[i].wr_id) != gen_) {
      return AssertionFailure() << "stale receive completion of generation " << wr_gen(wc[i].wr_id)
                                << " in generation " << gen_;
    }
    if (srq_ && wc[i].qp_num != qp_->qp_num) {
      return AssertionFailure() << "receive completion of QP " << wc[i].qp_num;
    }
    if (auto r = on_recv(wc[i], expect_dir, on_message); !r) return r;
  }
  n = ibv_poll_cq(send_cq_, kSlots, wc);
  if (n < 0) return AssertionFailure() << "ibv_poll_cq(send) failed";
  for (int i = 0; i < n; ++i) {
    if (wr_gen(wc[i].wr_id) != gen_) {
      return AssertionFailure() << "stale send completion of generation " << wr_gen(wc[i].wr_id)
                                << " in generation " << gen_;
    }
    --sends_out_;
    if (wc[i].status != IBV_WC_SUCCESS) {
      return AssertionFailure() << "send completion: " << ibv_wc_status_str(wc[i].status);
    }
  }
  return AssertionSuccess();
}

AssertionResult RcEndpoint::reap_flushed(std::chrono::steady_clock::time_point deadline,
                                         bool sends_may_succeed) {
  ibv_wc wc[kSlots];
  while (recvs_posted_ > 0 || sends_out_ > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      return AssertionFailure() << "flushed completions missing: " << recvs_posted_ << " receives, "
                                << sends_out_ << " sends";
    }
    for (ibv_cq* cq : {recv_cq_, send_cq_}) {
      int n = ibv_poll_cq(cq, kSlots, wc);
      for (int i = 0; i < n; ++i) {
        if (wr_gen(wc[i].wr_id) != gen_) return AssertionFailure() << "stale completion";
        const bool send = wr_kind(wc[i].wr_id) == kSend;
        const bool ok = wc[i].status == IBV_WC_WR_FLUSH_ERR ||
                        (send && sends_may_succeed && wc[i].status == IBV_WC_SUCCESS);
        if (!ok) return AssertionFailure() << "reaped " << ibv_wc_status_str(wc[i].status);
        --(send ? sends_out_ : recvs_posted_);
        if (wc[i].status == IBV_WC_WR_FLUSH_ERR) ++flushed_;
      }
    }
  }
  return AssertionSuccess();
}

AssertionResult RcEndpoint::reap_srq_leftovers() {
  if (!srq_) return AssertionFailure() << "no SRQ";
  ibv_wc wc[kSlots];
  for (;;) {
    const int n = ibv_poll_cq(recv_cq_, kSlots, wc);
    if (n < 0) return AssertionFailure() << "ibv_poll_cq(recv) failed";
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS && wc[i].status != IBV_WC_WR_FLUSH_ERR) {
        return AssertionFailure() << "leftover receive: " << ibv_wc_status_str(wc[i].status);
      }
      --recvs_posted_;
      ++stale_recvs_;
      if (auto r = post_receive(wr_slot(wc[i].wr_id)); !r) return r;
    }
    if (n < kSlots) return AssertionSuccess();
  }
}

AssertionResult RcEndpoint::expect_quiet(std::chrono::milliseconds window) {
  auto end = std::chrono::steady_clock::now() + window;
  ibv_wc wc;
  while (std::chrono::steady_clock::now() < end) {
    for (ibv_cq* cq : {recv_cq_, send_cq_}) {
      if (ibv_poll_cq(cq, 1, &wc) > 0) {
        return AssertionFailure() << "unexpected completion (generation " << wr_gen(wc.wr_id)
                                  << ", " << ibv_wc_status_str(wc.status) << ")";
      }
    }
  }
  return AssertionSuccess();
}

}  // namespace rmsg::softroce
