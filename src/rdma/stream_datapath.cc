// RdmaStream: data path — write (S2.3-S2.5), read (S2.6), completions, credits.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "base/copy_bytes.h"
#include "loop/loop_thread.h"
#include "rdma/rdma_stream.h"
#include "rmsg/log.h"

namespace rmsg::rdma {
namespace {

constexpr int kPollBatch = 16;

}  // namespace

// Send WRs staged by stage_message and posted together by post_chain.
struct RdmaStream::SendChain {
  static constexpr int kMax = 16;
  std::array<ibv_send_wr, kMax> wr;
  std::array<ibv_sge, kMax> sge;
  int n = 0;
  bool full() const noexcept { return n == kMax; }
};

// The bytes of a gather write, copied out block by block in order; the caller's spans
// are read in place (no concatenation first).
class RdmaStream::GatherSource {
 public:
  explicit GatherSource(std::span<const std::span<const std::byte>> parts) : parts_(parts) {
    for (const auto p : parts) size_ += p.size();
  }
  std::size_t size() const noexcept { return size_; }
  // The bytes when they are one span (a write(), or a writev() of one part).
  const std::byte* single() const noexcept {
    return parts_.size() == 1 ? parts_[0].data() : nullptr;
  }
  // Copies the next `len` bytes (len <= what is left) to `dst`.
  void copy_to(std::byte* dst, std::size_t len) noexcept {
    while (len > 0) {
      const auto part = parts_[part_];
      const std::size_t n = std::min(len, part.size() - offset_);
      if (n > 0) std::memcpy(dst, part.data() + offset_, n);  // n == 0: data() may be null
      dst += n;
      len -= n;
      offset_ += n;
      if (offset_ == part.size()) {
        ++part_;
        offset_ = 0;
      }
    }
  }

 private:
  std::span<const std::span<const std::byte>> parts_;
  std::size_t size_ = 0;
  std::size_t part_ = 0;
  std::size_t offset_ = 0;
};

// Posts receive block `block`: 0, or the provider's error. A consumed block posted again
// is owed to the peer as a credit; the initial posts (cm_post_receives, through repost)
// are the peer's starting credits, not owed. Inlined into the data path (read(), a control
// message's completion); repost() for the rest.
[[gnu::always_inline]] inline int RdmaStream::post_recv_block(std::uint32_t block, bool owed) {
  if (pool_) return repost_slot(block);  // a slot of the shared-receive pool
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(res_->recv_block(block)), geometry_.recv_block_size,
              res_->recv_mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wire::make_wr_id(res_->generation, wire::WrKind::recv, block);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(res_->qp.get(), &wr, &bad); rc != 0) return rc;
  ++res_->recv_posted;
  recv_ring_.on_posted(block);
  if (owed) credits_.on_reposted();
  return 0;
}

// Inlined into reap_recv, its one caller.
[[gnu::always_inline]] inline void RdmaStream::on_recv_completion(const ibv_wc& wc) {
  if (wire::wr_generation(wc.wr_id) != res_->generation) return;  // an earlier use's
  --res_->recv_posted;                                            // recycling reaps the rest
  if (wc.status != IBV_WC_SUCCESS) {
    counters_->wc_error(wc.status);
    if (!(qp_error_ && wc.status == IBV_WC_WR_FLUSH_ERR)) {
      RMSG_LOG(warn, "rdma receive completion: %s (%u bytes)", ibv_wc_status_str(wc.status),
               wc.byte_len);
      fail(make_wc_error(wc.status));
    }
    return;
  }
  if (error_) return;
  const auto block = static_cast<std::uint32_t>(wire::wr_index(wc.wr_id));
  auto imm = wire::decode_imm(ntohl(wc.imm_data));
  const bool ok_opcode = wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
  if (!ok_opcode || !imm || block >= recv_ring_.blocks()) {
    RMSG_LOG(warn, "rdma: invalid receive completion (opcode %d, flags %#x)", wc.opcode,
             wc.wc_flags);
    return fail(make_error_code(Errc::protocol_error));
  }
  if (!credits_.on_granted(imm->credits)) {
    RMSG_LOG(warn, "rdma: the peer returned %u credits, more than it was sent", imm->credits);
    return fail(make_error_code(Errc::protocol_error));
  }
  const bool is_data = imm->type == wire::MsgType::data;
  // A release belongs to the shared-receive mode, which takes on_shared_recv instead.
  const bool bad_len = is_data ? (wc.byte_len == 0 || wc.byte_len > geometry_.recv_block_size)
                               : (wc.byte_len != 0 || imm->type == wire::MsgType::release);
  const bool after_fin_ok =
      imm->type == wire::MsgType::credit || imm->type == wire::MsgType::keepalive;
  const bool peer_fin = rx_ != RxState::open;
  if (bad_len || (peer_fin && !after_fin_ok)) {
    RMSG_LOG(warn, "rdma: invalid message (type %d, %u bytes%s)", static_cast<int>(imm->type),
             wc.byte_len, peer_fin ? ", after FIN" : "");
    return fail(make_error_code(Errc::protocol_error));
  }
  ++rx_messages_;
  if (is_data) {
    counters_->messages_received.add();
    counters_->bytes_received.add(wc.byte_len);
    if (!recv_ring_.on_data(block, wc.byte_len)) {
      RMSG_LOG(warn, "rdma: completion of receive block %u, which is not posted", block);
      return fail(make_error_code(Errc::protocol_error));
    }
    return;
  }
  if (!recv_ring_.on_control(block)) {
    RMSG_LOG(warn, "rdma: completion of receive block %u, which is not posted", block);
    return fail(make_error_code(Errc::protocol_error));
  }
  if (imm->type == wire::MsgType::fin) rx_ = RxState::fin_received;
  if (imm->type == wire::MsgType::keepalive) {
    peer_keepalive_ = true;
    counters_->keepalives_received.add();
  }
  if (const int rc = post_recv_block(block); rc != 0) fail(errno_code(rc));
}

// The receive CQ's completions, inlined into the loop's poller (poll_from_loop) and
// into poll_recv_cq for the other callers.
[[gnu::always_inline]] inline int RdmaStream::reap_recv() {
  ibv_wc wc[kPollBatch];
  int total = 0;
  for (;;) {
    const int n = ibv_poll_cq(res_->recv_cq.get(), kPollBatch, wc);
    if (n < 0) {
      fail(make_error_code(Errc::device_error));
      return total;
    }
    if (pool_) {
      for (int i = 0; i < n; ++i) on_shared_recv(wc[i]);
    } else {
      for (int i = 0; i < n; ++i) on_recv_completion(wc[i]);
    }
    total += n;
    if (n < kPollBatch) return total;
  }
}

[[gnu::always_inline]] inline bool RdmaStream::reap_completions() {
  if (!res_) return false;
  // The receive CQ first: a message that arrived is what a busy loop waits for. The send
  // CQ only while a signalled WR is in flight (SendRing::signalled_in_flight), or once the
  // QP failed: then the completion naming the cause may be there, and this pass still
  // records it before the readiness pass reports the error. An empty ibv_poll_cq per pass
  // was a third of a busy spin's work.
  int n = reap_recv();
  if (send_ring_.signalled_in_flight() > 0 || error_ || qp_error_) n += poll_send_cq();
  if (n > 0) {
    flush_control();
    changed();
  }
  if (conn_ == ConnState::lingering) linger_progress();
  return n > 0;
}

// The common small write (a request, a reply) is posted here without a further call but
// the provider's post: under qemu TCG each call and return costs as much as ~20
// instructions, and send_data's path made four. The conditions are exactly those under
// which send_data would take its inline branch without reaping or flushing anything, and
// what the peer sees is the same SEND (send_inline).
Result<std::size_t> RdmaStream::write(std::span<const std::byte> data) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  write_called();
  const std::size_t size = data.size();
  if (conn_ == ConnState::established && !error_ && tx_ == TxState::open && rx_ != RxState::gone &&
      size - 1 < inline_limit_ && send_ring_.staged_blocks() == 0 && send_ring_.free_blocks() > 0 &&
      sq_free() >= 2 && credits_.can_send_data()) {
    ibv_send_wr wr{};
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(data.data()), static_cast<std::uint32_t>(size),
                res_->send_mr->lkey};
    const SendRing::Post post = send_ring_.post(false);
    wr.wr_id = wire::make_wr_id(res_->generation, wire::WrKind::send, post.slot);
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    grant_lease();
    wr.imm_data = htonl(wire::encode_imm(wire::MsgType::data, credits_.take_owed()));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_INLINE | (post.signalled ? unsigned{IBV_SEND_SIGNALED} : 0u);
    credits_.on_sent();
    ++tx_messages_;
    ++stats_.data_messages_sent;
    ++stats_.send_posts;
    ibv_send_wr* bad = nullptr;
    if (const int rc = ibv_post_send(res_->qp.get(), &wr, &bad); rc != 0) {
      return write_failed(errno_code(rc), 0);
    }
    counters_->messages_sent.add();
    counters_->bytes_sent.add(size);
    counters_->inline_sends.add();
    ++progress_;
    return size;
  }
  return write_slow(data);
}

// Every other write(), kept out of write() so that its fast path stays small.
[[gnu::noinline]] Result<std::size_t> RdmaStream::write_slow(std::span<const std::byte> data) {
  if (closed()) return Errc::closed;
  if (data.empty()) return Errc::invalid_argument;
  GatherSource src({&data, 1});
  return send_data(src);
}

Result<std::size_t> RdmaStream::writev(std::span<const std::span<const std::byte>> parts) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  write_called();
  if (closed()) return Errc::closed;
  GatherSource src(parts);
  if (src.size() == 0) return std::size_t{0};
  return send_data(src);
}

// write and writev: the bytes go into as many blocks as can be posted now (credits, free
// blocks, SQ slots), one SEND each, and every chain of up to SendChain::kMax is one post.
// What cannot be posted now is staged (SendRing::stage): appended to the last unposted
// block, so that many small writes stalled on credits share blocks and go out later in
// few SENDs (flush_staged). Staged bytes go before any new ones.
Result<std::size_t> RdmaStream::send_data(GatherSource& src) {
  if (error_) return error_;
  if (tx_ != TxState::open) return Errc::shutdown;
  if (rx_ == RxState::gone) return Errc::peer_closed;
  if (!established()) return Errc::not_connected;
  const std::size_t size = src.size();
  // S2.3/S2.4: reap only when the free blocks cannot take everything asked for.
  const std::size_t blocks_needed = (size + max_message_ - 1) / max_message_;
  if (send_ring_.free_blocks() < blocks_needed || sq_free() < blocks_needed + 1) {
    if (poll_send_cq() > 0) changed();
  }
  if (error_) return error_;  // a bad completion just reaped
  if (auto r = flush_staged(); !r) return write_failed(r.error(), 0);
  if (size <= inline_limit_ && src.single() != nullptr && send_ring_.staged_blocks() == 0 &&
      credits_.can_send_data() && sq_free() >= 2) {
    return send_inline(src.single(), static_cast<std::uint32_t>(size));
  }
  SendChain chain;
  std::size_t staged = 0;  // bytes in the chain
  std::size_t done = 0;    // bytes posted
  while (done + staged < size && send_ring_.staged_blocks() == 0) {
    // one SQ slot stays for control
    if (!credits_.can_send_data() || send_ring_.free_blocks() == 0 || sq_free() < 2) break;
    if (chain.full()) {
      if (auto r = post_chain(chain); !r) return write_failed(r.error(), done);
      done += std::exchange(staged, 0);
    }
    const std::size_t at = done + staged;
    const auto len = static_cast<std::uint32_t>(std::min<std::size_t>(max_message_, size - at));
    std::byte* block = res_->send_block(send_ring_.head_block());
    src.copy_to(block, len);  // S2.5: by block index
    stage_message(chain, wire::MsgType::data, block, len);
    staged += len;
  }
  if (auto r = post_chain(chain); !r) return write_failed(r.error(), done);
  done += staged;
  if (done < size && !credits_.can_send_data()) {
    ++stats_.credit_stalls;
    counters_->credit_stalls.add();
  }
  done += stage_rest(src, size - done);
  if (done == 0) {
    counters_->write_would_block.add();
    return Errc::would_block;
  }
  counters_->bytes_sent.add(done);
  ++progress_;
  return done;
}

// A message the QP takes inline goes out from the caller's bytes: the provider copies
// them into the send queue during ibv_post_send, so the WR holds no send block (no copy
// into one, no block to free, and small writes in flight are bounded by credits and SQ
// slots, not by blocks). The peer sees the same SEND as from a block.
Result<std::size_t> RdmaStream::send_inline(const std::byte* data, std::uint32_t len) {
  SendChain chain;
  add_wr(chain, wire::MsgType::data, data, len, send_ring_.post(false));
  if (auto r = post_chain(chain); !r) return write_failed(r.error(), 0);
  counters_->bytes_sent.add(len);
  counters_->inline_sends.add();
  ++progress_;
  return std::size_t{len};
}

// Copies up to `left` more bytes of `src` into staged blocks; returns how many fit.
std::size_t RdmaStream::stage_rest(GatherSource& src, std::size_t left) {
  std::size_t done = 0;
  while (done < left) {
    const auto want = static_cast<std::uint32_t>(std::min<std::size_t>(max_message_, left - done));
    const SendRing::Stage st = send_ring_.stage(max_message_, want);
    if (st.len == 0) break;
    src.copy_to(res_->send_block(st.block) + st.offset, st.len);
    done += st.len;
  }
  if (done > 0) counters_->bytes_staged.add(done);
  return done;
}

// Posts staged blocks, oldest first, while credits and SQ slots allow: one SEND each.
Result<void> RdmaStream::flush_staged() {
  if (send_ring_.staged_blocks() == 0) return {};
  SendChain chain;
  while (send_ring_.staged_blocks() > 0 && credits_.can_send_data() && sq_free() >= 2) {
    if (chain.full()) RMSG_TRY(post_chain(chain));
    const SendRing::Post post = send_ring_.post_staged();
    add_wr(chain, wire::MsgType::data, res_->send_block(post.block), post.len, post);
  }
  return post_chain(chain);
}

// A post failed: the stream fails; what earlier chains posted was taken.
Result<std::size_t> RdmaStream::write_failed(std::error_code ec, std::size_t posted) {
  fail(ec);
  if (posted == 0) return error_;
  counters_->bytes_sent.add(posted);
  ++progress_;
  return posted;
}

Result<std::size_t> RdmaStream::read(std::span<std::byte> buf) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed()) return Errc::closed;
  if (buf.empty()) return Errc::invalid_argument;
  // S2.6: nothing buffered. What this poll takes in (credit grants too) is a state change
  // like any other: a writer waiting in on_writable must hear of it.
  if (recv_ring_.empty() && res_ && !qp_error_ && poll_recv_cq() > 0) {
    flush_control();
    changed();
  }
  std::size_t done = 0;
  while (done < buf.size() && !recv_ring_.empty()) {
    const RecvRing::Front f = recv_ring_.front();
    const auto n =
        static_cast<std::uint32_t>(std::min<std::size_t>(buf.size() - done, f.len - f.offset));
    copy_bytes(buf.data() + done, rx_block(f.block) + f.offset, n);
    done += n;
    if (recv_ring_.consume(n)) {
      if (!error_ && !qp_error_) {
        if (const int rc = post_recv_block(f.block); rc != 0) fail(errno_code(rc));
      } else if (pool_) {
        repost_slot(f.block);  // back to the pool, no credit
      }
    }
  }
  if (done > 0) {
    flush_control();
    ++progress_;
    return done;
  }
  if (error_) return error_;
  if (rx_ != RxState::open) return std::size_t{0};
  if (counters_) counters_->read_would_block.add();
  return Errc::would_block;
}

Result<void> RdmaStream::shutdown_write() {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed()) return Errc::closed;
  if (error_) return error_;
  if (tx_ != TxState::open) return {};
  tx_ = TxState::fin_pending;
  flush_control();
  changed();  // write() now reports Errc::shutdown: on_writable hears of it once
  return {};
}

Result<void> RdmaStream::post_message(wire::MsgType type, const std::byte* src, std::uint32_t len,
                                      bool signal) {
  SendChain chain;
  stage_message(chain, type, src, len, signal);
  return post_chain(chain);
}

// Builds the next WR at the end of `chain` and accounts for it as posted: the next one's
// signalling decision depends on the ring and SQ space this one takes.
void RdmaStream::stage_message(SendChain& chain, wire::MsgType type, const std::byte* src,
                               std::uint32_t len, bool signal) {
  const bool data = type == wire::MsgType::data;
  add_wr(chain, type, src, len, send_ring_.post(data, signal));  // block, slot, signalling
}

void RdmaStream::add_wr(SendChain& chain, wire::MsgType type, const std::byte* src,
                        std::uint32_t len, const SendRing::Post& post) {
  const bool data = type == wire::MsgType::data;
  const int i = chain.n++;
  ibv_sge& sge = chain.sge[i];
  sge = {reinterpret_cast<std::uintptr_t>(src), len, res_->send_mr->lkey};
  ibv_send_wr& wr = chain.wr[i];
  wr = {};
  wr.wr_id = wire::make_wr_id(res_->generation, wire::WrKind::send, post.slot);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  grant_lease();
  wr.imm_data = htonl(wire::encode_imm(type, credits_.take_owed()));
  wr.sg_list = len > 0 ? &sge : nullptr;
  wr.num_sge = len > 0 ? 1 : 0;
  unsigned flags = post.signalled ? unsigned{IBV_SEND_SIGNALED} : 0u;
  if (len > 0 && len <= res_->inline_granted) flags |= IBV_SEND_INLINE;
  wr.send_flags = flags;
  if (i > 0) chain.wr[i - 1].next = &wr;
  credits_.on_sent();
  ++tx_messages_;
  if (data) {
    ++stats_.data_messages_sent;
    counters_->messages_sent.add();
  } else {
    if (type == wire::MsgType::credit) ++stats_.credit_messages_sent;
    counters_->control_sent.add();
  }
}

// A writer stalled on credits cannot send a keepalive. A zero-length RDMA WRITE needs no
// credit: the peer's transport ACKs it without a receive or a completion, and when the
// peer is gone it fails after the retries like any send (docs/protocol.md, Keepalive).
Result<void> RdmaStream::post_probe() {
  SendChain chain;
  ibv_send_wr& wr = chain.wr[chain.n++];
  wr = {};
  const SendRing::Post post = send_ring_.post(false, /*force_signal=*/true);
  wr.wr_id = wire::make_wr_id(res_->generation, wire::WrKind::send, post.slot);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;  // its completion tells that it is no longer in flight
  send_ring_.mark();                  // marked_done() once it completed
  counters_->probes_sent.add();
  return post_chain(chain);
}

// One ibv_post_send for the whole chain: one doorbell (on rxe, one system call). A failure
// leaves the accounting ahead of the QP, which no longer matters: the caller fails the stream.
Result<void> RdmaStream::post_chain(SendChain& chain) {
  if (chain.n == 0) return {};
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(res_->qp.get(), chain.wr.data(), &bad);
  chain.n = 0;
  ++stats_.send_posts;
  if (rc != 0) return errno_code(rc);
  return {};
}

Result<void> RdmaStream::repost(std::uint32_t block, bool owed) {
  if (const int rc = post_recv_block(block, owed); rc != 0) return errno_code(rc);
  return {};
}

void RdmaStream::flush_control_now() {
  if (!running() || error_ || qp_error_) return;
  if (auto r = flush_staged(); !r) return fail(r.error());
  if (tx_ == TxState::fin_pending && send_ring_.staged_blocks() == 0 && credits_.can_send_data() &&
      sq_free() >= 1) {
    // Signalled: its completion says the peer's transport has the FIN (a graceful close
    // waits for it).
    if (auto r = post_message(wire::MsgType::fin, nullptr, 0, true); !r) return fail(r.error());
    tx_ = TxState::fin_sent;
    fin_wait_ = send_ring_.in_flight();
  }
  if (credits_.should_send_credit() && sq_free() >= 1) {
    if (auto r = post_message(wire::MsgType::credit, nullptr, 0); !r) return fail(r.error());
  }
}

bool RdmaStream::poll_completions() {
  return reap_completions();
}

// The loop's poller (watch_completions). A readiness pass made due by what the poll reaped
// runs when the poll returns, inside the same poller call, rather than through defer() and
// the loop's deferred queue: the poller runs at the top of the loop's iteration, where a
// callback may run, and a busy loop's message gets to its reader without a queued task.
// What the pass makes due again goes through defer() as usual (in_poller_ is off by then).
// The receive path (reap_completions) is inlined into it.
bool RdmaStream::poll_from_loop() {
  in_poller_ = true;
  const bool found = reap_completions();
  in_poller_ = false;
  if (std::exchange(notify_now_, false)) notify_pass();  // may destroy this stream
  return found;
}

int RdmaStream::poll_send_cq() {
  ibv_wc wc[kPollBatch];
  int total = 0;
  for (;;) {
    const int n = ibv_poll_cq(res_->send_cq.get(), kPollBatch, wc);
    if (n < 0) {
      fail(make_error_code(Errc::device_error));
      return total;
    }
    for (int i = 0; i < n; ++i) on_send_completion(wc[i]);
    total += n;
    if (n < kPollBatch) return total;
  }
}

int RdmaStream::poll_recv_cq() {
  return reap_recv();
}

void RdmaStream::on_send_completion(const ibv_wc& wc) {
  if (wire::wr_generation(wc.wr_id) != res_->generation) return;  // an earlier use's
  if (wc.status != IBV_WC_SUCCESS) {
    counters_->wc_error(wc.status);
    if (!(qp_error_ && wc.status == IBV_WC_WR_FLUSH_ERR)) {
      RMSG_LOG(warn, "rdma send completion: %s", ibv_wc_status_str(wc.status));
      fail(make_wc_error(wc.status));
    }
    return;
  }
  // Completions arrive in order: one signalled WR completes every WR before it. A slot
  // not in flight is ignored (SendRing::complete).
  const std::uint32_t done =
      send_ring_.complete(static_cast<std::uint32_t>(wire::wr_index(wc.wr_id)));
  ++stats_.send_completions;
  if (fin_wait_ > 0) {
    fin_wait_ -= std::min(done, fin_wait_);
    if (fin_wait_ == 0) tx_ = TxState::fin_acked;
  }
}

void RdmaStream::fail(std::error_code ec) {
  if (conn_ == ConnState::lingering && !error_) {  // the linger ends: abortive
    error_ = ec;
    move_qp_to_error();
    return schedule_linger_end();
  }
  if (closed()) return;
  if (error_) {
    // A flushed request only says that the QP is in error; the completion that put it
    // there (often on the other CQ, polled in the same pass) or the device's async event
    // (a port error: adaptive polling may reap the flush before the loop reads the event)
    // names the cause: keep that.
    // A local QP operation error is, on rxe, a send that could not leave a port that went
    // down: the PORT_ERR event read a moment later names that cause too.
    const auto flushed = make_wc_error(IBV_WC_WR_FLUSH_ERR);
    const bool is_event = ec.category() == async_event_category();
    const bool names_cause = is_event || (ec.category() == wc_category() && ec != flushed);
    const bool port_down = ec == make_async_event_error(IBV_EVENT_PORT_ERR);
    if ((error_ == flushed && names_cause) ||
        (error_ == make_wc_error(IBV_WC_LOC_QP_OP_ERR) && port_down)) {
      error_ = ec;
    }
    return;
  }
  error_ = ec;
  RMSG_LOG(warn, "rdma stream failed: %s", ec.message().c_str());
  const bool in_setup = conn_ == ConnState::connecting;
  enter(in_setup ? ConnState::setup_failed : ConnState::failed);
  if (cm_) cm_->disconnect();  // the peer learns at once
  move_qp_to_error();
  if (in_setup) finish_setup(ec);
  changed();
}

}  // namespace rmsg::rdma
