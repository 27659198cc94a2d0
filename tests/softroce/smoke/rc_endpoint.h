// One side of an RC connection for the Soft-RoCE smoke tests, on raw verbs: a PD, a send
// and a receive CQ, one MR holding kSlots receive and kSlots send slots, and a QP (either
// rdma_create_qp's or the endpoint's own ibv_create_qp). Every message carries its
// generation, sequence number, direction and a length-dependent pattern, and every
// received one is checked. Work-request ids carry the generation too, so a completion left
// over from an earlier connection on a recycled QP is caught as stale.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdint>
#include <functional>

namespace rmsg::softroce {

class RcEndpoint {
 public:
  static constexpr int kSlots = 16;  // receives kept posted, send slots
  static constexpr std::uint32_t kSlotBytes = 4096;

  RcEndpoint() = default;
  ~RcEndpoint();
  RcEndpoint(const RcEndpoint&) = delete;
  RcEndpoint& operator=(const RcEndpoint&) = delete;

  // PD, CQs and MR on ctx; with `shared_receive`, an SRQ too, which the endpoint's own QP
  // then takes its receives from (the receives outlive a connection: a QP in ERR does not
  // flush them, and any QP on the SRQ may consume them, so their wr_ids carry no
  // generation that matters: a message's own header tells which connection sent it).
  ::testing::AssertionResult create(ibv_context* ctx, bool shared_receive = false);
  // The QP through rdma_create_qp on id (the id owns it), or as the endpoint's own.
  ::testing::AssertionResult create_qp_on(rdma_cm_id* id);
  ::testing::AssertionResult create_own_qp();

  ibv_qp* qp() const { return qp_; }
  ibv_cq* send_cq() const { return send_cq_; }
  ibv_cq* recv_cq() const { return recv_cq_; }
  ibv_mr* mr() const { return mr_; }
  ibv_srq* srq() const { return srq_; }

  // Starts a new connection's generation: counters and sequence numbers restart.
  void begin_generation(std::uint32_t gen);
  ::testing::AssertionResult post_all_receives();
  // Sends message `seq` in direction `dir` (0 = client->server, 1 = back).
  ::testing::AssertionResult send(std::uint32_t seq, std::uint32_t dir);
  // Polls both CQs once. Each intact message goes to on_message(seq); a failed completion,
  // a corrupt or out-of-order message or a stale completion is an error.
  ::testing::AssertionResult poll(
      std::uint32_t expect_dir,
      const std::function<::testing::AssertionResult(std::uint32_t)>& on_message);

  // After the QP went to ERR: reaps until every posted request has completed (flushed;
  // with `sends_may_succeed`, a send may also have completed before the ERR).
  ::testing::AssertionResult reap_flushed(std::chrono::steady_clock::time_point deadline,
                                          bool sends_may_succeed = false);
  // Asserts the CQs stay empty for `window` (nothing stale surfaces after RESET).
  ::testing::AssertionResult expect_quiet(std::chrono::milliseconds window);

  // With an SRQ: after the QP went to ERR and its sends (a signalled marker last) were
  // reaped, takes what is left in the receive CQ: each receive completion of this
  // generation (success or flush) is counted in stale_receives(), and its slot re-posted.
  ::testing::AssertionResult reap_srq_leftovers();
  int stale_receives() const { return stale_recvs_; }
  int receives_posted() const { return recvs_posted_; }
  int sends_outstanding() const { return sends_out_; }
  int flushed() const { return flushed_; }
  std::uint32_t received() const { return rx_seq_; }

 private:
  ::testing::AssertionResult post_receive(int slot);
  ::testing::AssertionResult on_recv(
      const ibv_wc& wc, std::uint32_t dir,
      const std::function<::testing::AssertionResult(std::uint32_t)>& on_message);
  char* slot_ptr(int slot, bool send) const;

  ibv_pd* pd_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_srq* srq_ = nullptr;
  char* buf_ = nullptr;
  ibv_qp* qp_ = nullptr;
  bool own_qp_ = false;

  std::uint32_t gen_ = 0;
  std::uint32_t rx_seq_ = 0;
  std::uint32_t tx_count_ = 0;
  int recvs_posted_ = 0;
  int stale_recvs_ = 0;
  int sends_out_ = 0;
  int flushed_ = 0;
};

}  // namespace rmsg::softroce
