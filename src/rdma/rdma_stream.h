// RdmaStream: rmsg::Stream over an RC queue pair (S2.1-S2.6 plus credits).
//
// Setup (stream_setup.cc) runs through rdmacm::CmConnection; this class is its delegate and
// obtains its ConnResources through ResourceHooks at the CM's seam. The data path
// (stream_datapath.cc):
//   send  a ring of K blocks (SendRing: positions, WR slots, signalling); write() (and writev(),
//   its gather form) reaps the send CQ
//         only when the free blocks do not cover the bytes asked (S2.3/S2.4), copies
//         into blocks by index (S2.5) and posts one SEND_WITH_IMM per block (a write's
//         SENDs go in chains of up to 16 WRs, one ibv_post_send each), selectively
//         signalled: a WR is signalled when it takes the last free block or the send
//         queue's last data slot, or every K/2 WRs, so a blocked writer always has a
//         completion coming that frees space. What cannot be posted at once (fewer than
//         2 credits, no SQ slot) is staged: appended to the last unposted block
//         (SendRing::stage) and returned as written; flush_staged() posts staged blocks,
//         oldest first, when credits or slots return, before any newer bytes.
//   recv  R blocks, all posted before connect/accept; completions queue blocks with their
//         lengths (RecvRing); read() copies across blocks and re-posts each consumed one (S2.6). An
//         invalid completion fails this stream only.
//   flow  Credits (credits.h): no SEND without a peer receive for it.
//   poll  the loop's poller (EventLoop::add_poller): poll_completions() reaps both CQs;
//         arm_completions() arms them before the loop sleeps (the send CQ only while a
//         sender waits: wants_send_completions()); a channel event is read once.
//   ready readiness callbacks run when their condition becomes true (a completion or a
//         state change: changed()), when set while it holds, and again after a call only
//         if that call made progress (read/write moved bytes, or the state changed) —
//         never again for an unchanged state. on_writable also fires once when write()
//         would report an error (failed, peer gone, after shutdown_write()).
//
// Threading: loop thread only. Ownership: the Stream handle owns it once established;
// before that the listener (passive) or the stream itself (active connect) does.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "loop/alive.h"
#include "rdma/credits.h"
#include "rdma/recv_ring.h"
#include "rdma/resources.h"
#include "rdma/send_ring.h"
#include "rdma/srq/credit_lease.h"
#include "rdma/srq/shared_receive.h"
#include "rdma/stream_counters.h"
#include "rdma/stream_state.h"
#include "rdma/wire.h"
#include "rdmacm/cm_connection.h"
#include "rmsg/rdma.h"
#include "rmsg/stream.h"
#include "verbs/async_events.h"

namespace rmsg::rdma {

class RdmaStream final : public StreamImpl, private rdmacm::CmConnection::Delegate {
 public:
  // Runs once, deferred (never inside a CM event or a caller's call): established or not.
  using SetupDone = std::function<void(std::error_code)>;

  // `lease` (a connection manager's count of it, base/lease.h) is held until the stream is
  // released: destroyed, or for a lingering stream when its linger ends.
  static Result<std::unique_ptr<RdmaStream>> create(EventLoop& loop, const RdmaOptions& options,
                                                    ResourceHooks hooks, Lease lease = {});
  RdmaStream(const RdmaStream&) = delete;
  RdmaStream& operator=(const RdmaStream&) = delete;
  RdmaStream(RdmaStream&&) = delete;
  RdmaStream& operator=(RdmaStream&&) = delete;
  ~RdmaStream() override;

  Result<void> start_connect(const SocketAddress& peer, SetupDone done);
  // Inside the listener's CONNECT_REQUEST dispatch; `peer` is the request's hello.
  Result<void> start_accept(const rdma_cm_event& request, const wire::Hello& peer, SetupDone done);
  // Outside any dispatch, for a request acked already (handed over from another loop):
  // `id` is on this loop's channel, `request` its private data.
  Result<void> start_accept(verbs::CmId id, std::span<const std::byte> request,
                            const wire::Hello& peer, SetupDone done);
  // An active connect owns its stream until the result is delivered. If the loop is
  // destroyed first, the setup callback runs from ~EventLoop with Errc::cancelled.
  void hold_self(std::unique_ptr<RdmaStream> self);
  std::unique_ptr<RdmaStream> release_self();

  RdmaStreamInfo info() const;
  const CounterSet* counters() const { return counters_ ? &counters_->set() : nullptr; }
  // The QP while the stream holds its resources, else null (rdma/seams.h).
  friend ibv_qp* stream_qp(const Stream& stream);
  // The features negotiated from the hellos (rdma/seams.h).
  friend std::uint32_t stream_features(const Stream& stream);

  Result<std::size_t> write(std::span<const std::byte> data) override;
  // As write() of the parts' concatenation: the same blocks, messages and chains, the
  // bytes copied from each part straight into the send blocks. Only empty parts return 0
  // (closed: Errc::closed).
  Result<std::size_t> writev(std::span<const std::span<const std::byte>> parts) override;
  Result<std::size_t> read(std::span<std::byte> buf) override;
  void on_readable(Task callback) override;
  void on_writable(Task callback) override;
  Result<void> shutdown_write() override;
  // After shutdown_write() graceful: the stream lingers (ConnState::lingering, owned by
  // the loop once the handle lets go: release()) until the FIN's send completion, then
  // tears down as an abortive close does; RdmaOptions::linger_timeout bounds it.
  void close() override;
  void release(std::unique_ptr<StreamImpl> self) noexcept override;
  std::error_code error() const override;
  const char* transport() const override { return "rdma"; }
  std::string local_address() const override;
  std::string peer_address() const override;
  EventLoop& loop() const override { return loop_; }

 private:
  RdmaStream(EventLoop& loop, const RdmaOptions& options, const Geometry& geometry,
             ResourceHooks hooks, Lease lease, std::shared_ptr<rdmacm::CmChannel> channel);

  // rdmacm::CmConnection::Delegate (stream_setup.cc)
  Result<ibv_qp*> cm_acquire(rdma_cm_id* id, std::span<const std::byte> peer) override;
  Result<void> cm_post_receives() override;
  std::span<const std::byte> cm_private_data() override;
  Result<void> cm_check_reply(std::span<const std::byte> peer) override;
  std::error_code cm_rejected(int status, std::span<const std::byte> data) override;
  void cm_established() override;
  void cm_failed(std::error_code ec) override;
  void cm_disconnected() override;

  // setup and teardown (stream_setup.cc)
  void negotiate(const wire::Hello& peer);
  Result<void> watch_completions();
  void unwatch_completions();
  void on_cq_event(bool send);
  bool arm_completions();
  bool wants_send_completions() const;
  void finish_setup(std::error_code ec);
  void move_qp_to_error();

  // liveness and device events (stream_liveness.cc)
  Result<void> watch_device(rdma_cm_id* id);
  void start_liveness();
  void stop_liveness();
  void on_liveness_tick();
  bool peer_can_send() const;
  void on_async_event(const verbs::AsyncEvent& event);
  void drop_device_resources();
  void release_resources(verbs::CmId old_id, bool timewait_exited, bool was_established);
  void teardown(bool was_established);

  // graceful close (stream_linger.cc)
  void start_linger();
  void linger_progress();
  void schedule_linger_end();
  std::unique_ptr<RdmaStream> end_linger();
  void discard_received();

  // data path (stream_datapath.cc)
  bool poll_completions();
  bool reap_completions();  // poll_completions' work, inlined into the loop's poller
  int poll_send_cq();
  int poll_recv_cq();
  void on_send_completion(const ibv_wc& wc);
  void on_recv_completion(const ibv_wc& wc);
  struct SendChain;
  class GatherSource;
  Result<std::size_t> write_slow(std::span<const std::byte> data);
  Result<std::size_t> send_data(GatherSource& src);
  Result<std::size_t> write_failed(std::error_code ec, std::size_t posted);
  Result<void> post_message(wire::MsgType type, const std::byte* src, std::uint32_t len,
                            bool signal = false);
  void stage_message(SendChain& chain, wire::MsgType type, const std::byte* src, std::uint32_t len,
                     bool signal = false);
  void add_wr(SendChain& chain, wire::MsgType type, const std::byte* src, std::uint32_t len,
              const SendRing::Post& post);
  std::size_t stage_rest(GatherSource& src, std::size_t left);
  Result<std::size_t> send_inline(const std::byte* data, std::uint32_t len);
  Result<void> flush_staged();
  Result<void> post_chain(SendChain& chain);
  Result<void> post_probe();
  Result<void> repost(std::uint32_t block, bool owed = true);
  int post_recv_block(std::uint32_t block, bool owed = true);
  int reap_recv();
  // Posts what is due: staged blocks, the FIN, a credit message. Inline, so that the
  // common case after a message (nothing due) costs no call (flush_control_now does it).
  void flush_control() {
    if (send_ring_.staged_blocks() != 0 || tx_ == TxState::fin_pending ||
        credits_.should_send_credit()) {
      flush_control_now();
    }
  }
  void flush_control_now();
  void fail(std::error_code ec);
  // shared receive (srq/stream_shared_receive.cc): receives from the loop's pool
  Result<void> join_pool(ibv_context* ctx);
  void leave_pool();
  void on_shared_recv(const ibv_wc& wc);
  int repost_slot(std::uint32_t slot);
  int repost_pool_block(std::uint32_t block);
  bool leasing() const noexcept { return (features_ & wire::kFeatureSharedReceive) != 0; }
  // Before a message takes what is owed: a busy peer's lease grows with it.
  void grant_lease() {
    if (leasing()) grant_lease_now();
  }
  void grant_lease_now();
  void release_lease();
  const std::byte* rx_block(std::uint32_t slot) const noexcept {
    return pool_ ? pool_->block(slot_block_[slot]) : res_->recv_block(slot);
  }
  // readiness (stream_readiness.cc)
  // (defined below the class: inline, they run after every message)
  void changed();
  void schedule_notify();
  void defer_notify();
  bool readable_now() const;
  bool writable_now() const;
  // the one ConnState transition (stream_setup.cc)
  void enter(ConnState to);
  bool established() const noexcept { return conn_ == ConnState::established; }
  // close() ran (the stream may still linger)
  bool closed() const noexcept {
    return conn_ == ConnState::closed || conn_ == ConnState::lingering;
  }
  // the data path runs: established, or lingering after close()
  bool running() const noexcept {
    return conn_ == ConnState::established || conn_ == ConnState::lingering;
  }
  std::uint32_t sq_free() const noexcept { return send_ring_.free_slots(); }

  EventLoop& loop_;
  RdmaOptions options_;
  Geometry geometry_;
  ResourceHooks hooks_;
  Lease lease_;
  std::shared_ptr<rdmacm::CmChannel> channel_;
  std::uint32_t advertised_ = 0;  // feature bits our hello sets
  std::unique_ptr<ConnResources> res_;
  wire::HelloBytes hello_;
  SetupDone setup_done_;
  Task on_readable_;
  Task on_writable_;

  // negotiated
  std::uint32_t max_message_ = 0;
  // What one inline SEND may carry: the device's grant, but never more than max_message_
  // (a peer's receive block may be smaller than the grant).
  std::uint32_t inline_limit_ = 0;
  std::uint32_t peer_recv_blocks_ = 0;
  std::uint32_t features_ = 0;  // both hellos set these bits (wire.h, Feature bits)
  Credits credits_;

  SendRing send_ring_;  // send blocks and send-queue slots (wr_id index = slot)
  RecvRing recv_ring_;  // receive blocks: posted, queued for read(), consumed

  // Shared receive: set while our receives come from the loop's pool. recv_ring_ then
  // counts slots (up to our window's ceiling), each naming the pool block it holds.
  std::shared_ptr<SharedReceive> pool_;
  bool admitted_ = false;     // holds a guaranteed part of the pool's budget
  CreditLease window_lease_;  // the peer's window at our pool
  std::vector<std::uint32_t> slot_block_;
  std::vector<std::uint32_t> free_slots_;
  std::uint64_t data_sent_seen_ = 0;  // data messages sent at the previous liveness tick
  std::array<std::byte, wire::kReleasePayload> release_payload_{};

  // state (stream_state.h)
  bool passive_ = false;  // the role, fixed at start_accept
  ConnState conn_ = ConnState::connecting;
  TxState tx_ = TxState::open;
  RxState rx_ = RxState::open;
  bool qp_error_ = false;       // the QP's own state: moved to ERR, flushed completions expected
  std::error_code error_;       // set with failed / setup_failed, sticky
  std::uint32_t fin_wait_ = 0;  // WRs (the FIN last) to complete before the FIN is acked
  TimerId linger_timer_ = 0;
  bool linger_end_scheduled_ = false;

  // readiness: which callbacks are due (the state changed, or their last call made
  // progress), and a count of progress for telling whether a call made any
  static constexpr std::uint8_t kWantRead = 1;
  static constexpr std::uint8_t kWantWrite = 2;
  std::uint8_t want_ = 0;
  bool notify_scheduled_ = false;
  // What a deferred task (a readiness pass, the setup callback, the linger's end) and a
  // dispatch frame (run_callback) ask "is this stream still there" (loop/alive.h); ended at
  // teardown: a task still pending finds nothing and does nothing.
  Alive<RdmaStream> alive_{loop_, this};
  void notify_pass();
  bool run_callback(Task& slot, const std::uint64_t& sets);
  std::uint64_t readable_sets_ = 0;  // on_readable() calls: a running callback set a new one
  std::uint64_t writable_sets_ = 0;
  // poll_from_loop: inside the loop's poll of this stream, where a due readiness pass runs
  // as soon as the poll returns instead of through defer()
  bool in_poller_ = false;
  bool notify_now_ = false;
  bool poll_from_loop();
  std::uint64_t progress_ = 0;
  // on_writable rests after a call that made no write()/writev() call and no progress:
  // more space for a stream already writable is no news (stream.h). write()/writev(),
  // setting the callback, or a change in write()'s outcome (error, peer gone, shutdown)
  // ends the rest.
  std::uint64_t write_calls_ = 0;
  bool write_resting_ = false;
  bool write_rest_final_ = false;  // write_final() when the rest began
  void write_called() {
    ++write_calls_;
    write_resting_ = false;
  }
  bool write_final() const { return error_ || rx_ == RxState::gone || tx_ != TxState::open; }

  std::uint64_t poller_ = 0;
  bool send_armed_ = false;  // ibv_req_notify_cq since the CQ's last event
  bool recv_armed_ = false;
  RdmaStreamInfo stats_;
  std::unique_ptr<StreamCounters> counters_;  // from cm_acquire (the device is known)

  // liveness: message counts seen at the previous tick (no clock on the data path)
  TimerId liveness_timer_ = 0;
  std::uint64_t tx_messages_ = 0;
  std::uint64_t tx_seen_ = 0;
  std::uint64_t rx_messages_ = 0;
  std::uint64_t rx_seen_ = 0;
  std::uint32_t idle_ticks_ = 0;
  bool peer_keepalive_ = false;  // the peer sends keepalives: its silence means something
  std::uint64_t destroy_hook_ = 0;
  verbs::AsyncRegistration async_;  // reset before res_ is released: it names QP and CQs

  std::unique_ptr<RdmaStream> self_;          // active connect until delivered; a lingering stream
  std::unique_ptr<rdmacm::CmConnection> cm_;  // destroyed before res_ (declared after)
};

// Readiness (stream_readiness.cc has the rest): inline because every message runs them.
inline bool RdmaStream::readable_now() const {
  return !recv_ring_.empty() || rx_ != RxState::open || error_;
}

// A state change: both callbacks are due if their condition holds.
inline void RdmaStream::changed() {
  ++progress_;
  if (write_resting_ && write_final() != write_rest_final_) write_resting_ = false;
  want_ = write_resting_ ? kWantRead : kWantRead | kWantWrite;
  schedule_notify();
}

// Defers one notification pass when a due callback's condition holds. A callback runs at
// most once per pass and is due again only if its call made progress (progress_ moved:
// bytes read or written, or a state change) — an unchanged state is never reported twice.
inline void RdmaStream::schedule_notify() {
  if (notify_scheduled_ || closed()) return;
  const bool read_due = (want_ & kWantRead) != 0 && on_readable_ && readable_now();
  if (!read_due && !((want_ & kWantWrite) != 0 && on_writable_ && writable_now())) return;
  notify_scheduled_ = true;
  if (in_poller_) {  // poll_from_loop runs the pass when the poll returns
    notify_now_ = true;
    return;
  }
  defer_notify();
}

// Runs a due callback, moved out while it runs (a copy of a std::function costs two
// indirect calls) and put back unless the callback set a new one or closed the stream.
// False when the callback destroyed the stream. Inlined into notify_pass (a call and its
// return cost ~20 instructions' time under qemu TCG, and this runs once per message).
[[gnu::always_inline]] inline bool RdmaStream::run_callback(Task& slot, const std::uint64_t& sets) {
  const auto frame = alive_.token();
  const std::uint64_t sets_before = sets;
  Task cb = std::move(slot);
  cb();
  if (!frame.alive()) return false;
  if (sets == sets_before && !closed()) slot.swap(cb);  // slot is empty: a swap inlines
  return true;
}

// One notification pass. A callback may close or destroy the stream: after each, its
// token is asked (locals only: `this` may be gone). Inline: the loop's poller
// (poll_from_loop) runs one for each message it reaps.
[[gnu::always_inline]] inline void RdmaStream::notify_pass() {
  notify_scheduled_ = false;
  if ((want_ & kWantRead) != 0 && on_readable_ && readable_now()) {
    want_ &= ~kWantRead;
    const std::uint64_t before = progress_;
    if (!run_callback(on_readable_, readable_sets_)) return;
    if (progress_ != before) want_ |= kWantRead;
  }
  if ((want_ & kWantWrite) != 0 && on_writable_ && writable_now()) {
    want_ &= ~kWantWrite;
    const std::uint64_t before = progress_;
    const std::uint64_t writes_before = write_calls_;
    if (!run_callback(on_writable_, writable_sets_)) return;
    if (progress_ != before) {
      want_ |= kWantWrite;
    } else if (write_calls_ == writes_before) {
      write_resting_ = true;
      write_rest_final_ = write_final();
    }
  }
  schedule_notify();
}

}  // namespace rmsg::rdma
