// RdmaStream: the shared-receive mode's receive path (docs/protocol.md, Shared receive).
// Receives come from the loop's pool (SharedReceive); a completion names a pool block,
// which takes a free slot of recv_ring_ while it holds unread data. Every block goes back
// to the pool: re-posted once read (its credit owed, or withheld to shrink a lease), at
// once for a control message, and at the end after the QP went ERR then RESET.
#include <arpa/inet.h>

#include <cstring>

#include "rdma/rdma_stream.h"
#include "rmsg/log.h"

namespace rmsg::rdma {

Result<void> RdmaStream::join_pool(ibv_context* ctx) {
  auto pool = SharedReceive::for_loop(loop_, ctx, options_);
  if (!pool) return pool.error();
  if (!pool.value()->budget().admit()) {
    RMSG_LOG(warn, "rdma: shared receive budget full (%u connections of %u credits): refused",
             pool.value()->budget().config().connections,
             pool.value()->budget().config().guaranteed);
    return Errc::resource_exhausted;
  }
  pool_ = std::move(pool).value();
  admitted_ = true;
  const std::uint32_t window = pool_->window();
  geometry_.recv_block_size = pool_->block_size();
  geometry_.recv_block_count = pool_->budget().config().guaranteed;
  geometry_.recv_window = window;
  recv_ring_.reset(window);
  slot_block_.assign(window, 0);
  free_slots_.clear();
  for (std::uint32_t s = window; s-- > 0;) free_slots_.push_back(s);
  window_lease_.reset(geometry_.recv_block_count,
                      geometry_.recv_block_count);  // negotiate() widens
  return {};
}

// teardown: after move_qp_to_error, before the structure is released.
void RdmaStream::leave_pool() {
  if (!pool_) return;
  while (!recv_ring_.empty()) {  // unread data
    const RecvRing::Front f = recv_ring_.front();
    recv_ring_.consume(f.len - f.offset);
    free_slots_.push_back(f.block);
    pool_->post(slot_block_[f.block]);
  }
  if (res_ && res_->qp) {
    // rxe raises no LAST_WQE_REACHED: RESET stops the responder, so every receive this QP
    // took is in its CQ once RESET returns; their blocks go back to the pool.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RESET;
    ibv_modify_qp(res_->qp.get(), &attr, IBV_QP_STATE);
    ibv_wc wc[16];
    int n = 0;
    while ((n = ibv_poll_cq(res_->recv_cq.get(), 16, wc)) > 0) {
      for (int i = 0; i < n; ++i) {
        const auto block = static_cast<std::uint32_t>(wire::wr_index(wc[i].wr_id));
        if (wire::wr_kind(wc[i].wr_id) != wire::WrKind::recv || block >= pool_->blocks()) continue;
        pool_->on_taken();
        pool_->post(block);
      }
    }
  }
  if (admitted_) pool_->budget().leave(window_lease_.leased());
  admitted_ = false;
}

int RdmaStream::repost_pool_block(std::uint32_t block) {
  if (const int rc = pool_->post(block); rc != 0) return rc;
  if (window_lease_.on_reposted(pool_->budget().pressure())) {
    credits_.on_reposted();
  } else {
    pool_->budget().give_back(1);  // withheld: the lease shrinks
  }
  return 0;
}

int RdmaStream::repost_slot(std::uint32_t slot) {
  free_slots_.push_back(slot);
  if (error_ || qp_error_) return pool_->post(slot_block_[slot]);  // no credit: the end
  return repost_pool_block(slot_block_[slot]);
}

void RdmaStream::on_shared_recv(const ibv_wc& wc) {
  const auto block = static_cast<std::uint32_t>(wire::wr_index(wc.wr_id));
  if (wire::wr_kind(wc.wr_id) != wire::WrKind::recv || block >= pool_->blocks()) return;
  pool_->on_taken();
  if (wc.status != IBV_WC_SUCCESS) {
    pool_->post(block);
    counters_->wc_error(wc.status);
    if (!(qp_error_ && wc.status == IBV_WC_WR_FLUSH_ERR)) {
      RMSG_LOG(warn, "rdma receive completion: %s", ibv_wc_status_str(wc.status));
      fail(make_wc_error(wc.status));
    }
    return;
  }
  auto bad = [&](const char* what) {
    pool_->post(block);
    RMSG_LOG(warn, "rdma: invalid message on the shared receive pool: %s", what);
    fail(make_error_code(Errc::protocol_error));
  };
  if (error_) return static_cast<void>(pool_->post(block));
  auto imm = wire::decode_imm(ntohl(wc.imm_data));
  if (wc.opcode != IBV_WC_RECV || (wc.wc_flags & IBV_WC_WITH_IMM) == 0 || !imm) {
    return bad("opcode or immediate");
  }
  if (!credits_.on_granted(imm->credits)) return bad("more credits than the window");
  const wire::MsgType type = imm->type;
  const bool is_data = type == wire::MsgType::data;
  const bool is_release = type == wire::MsgType::release;
  const std::uint32_t want_len = is_release ? wire::kReleasePayload : 0;
  if (is_data ? (wc.byte_len == 0 || wc.byte_len > geometry_.recv_block_size)
              : wc.byte_len != want_len) {
    return bad("length");
  }
  const bool after_fin_ok =
      type == wire::MsgType::credit || type == wire::MsgType::keepalive || is_release;
  if (rx_ != RxState::open && !after_fin_ok) return bad("after FIN");
  ++rx_messages_;
  if (is_data) {
    if (free_slots_.empty()) return bad("beyond the window");
    const std::uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    slot_block_[slot] = block;
    recv_ring_.on_posted(slot);
    recv_ring_.on_data(slot, wc.byte_len);
    window_lease_.on_data();
    counters_->messages_received.add();
    counters_->bytes_received.add(wc.byte_len);
    return;
  }
  if (is_release) {
    std::uint32_t be = 0;
    std::memcpy(&be, pool_->block(block), sizeof be);
    const std::uint32_t n = ntohl(be);
    if (!leasing() || !window_lease_.on_release(n)) return bad("release");
    pool_->budget().give_back(n);
  }
  if (type == wire::MsgType::fin) rx_ = RxState::fin_received;
  if (type == wire::MsgType::keepalive) {
    peer_keepalive_ = true;
    counters_->keepalives_received.add();
  }
  if (const int rc = repost_pool_block(block); rc != 0) fail(errno_code(rc));
}

void RdmaStream::grant_lease_now() {
  const std::uint32_t n = pool_->budget().lease(window_lease_.wanted(credits_.threshold()));
  if (n == 0) return;
  window_lease_.grow(n);
  credits_.on_reposted(n);  // returned with what is owed
}

// The liveness tick of a stream whose peer leases to it: credits beyond the peer's
// guaranteed window go back once no data went for a whole interval.
void RdmaStream::release_lease() {
  const bool idle = stats_.data_messages_sent == data_sent_seen_;
  data_sent_seen_ = stats_.data_messages_sent;
  const std::uint32_t n = release_due(credits_.available(), peer_recv_blocks_, idle);
  if (n == 0 || !credits_.can_send_data() || sq_free() < 2 || send_ring_.staged_blocks() != 0 ||
      res_->inline_granted < wire::kReleasePayload) {
    return;
  }
  const std::uint32_t be = htonl(n);
  std::memcpy(release_payload_.data(), &be, sizeof be);
  if (auto r = post_message(wire::MsgType::release, release_payload_.data(), wire::kReleasePayload);
      !r) {
    return fail(r.error());
  }
  static_cast<void>(credits_.drop(n));  // n < what is held: release_due
}

}  // namespace rmsg::rdma
