#include "rdma/recycler.h"

#include "rdma/wire.h"
#include "rmsg/log.h"

namespace rmsg::rdma {
namespace {

// The marker's index: beyond any send sequence number a stream reaches (2^40 WRs).
constexpr std::uint64_t kMarkerIndex = (std::uint64_t{1} << 40) - 1;
constexpr int kPollBatch = 16;

Result<void> modify_state(ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr attr{};
  attr.qp_state = state;
  return verbs::check_rc(ibv_modify_qp(qp, &attr, IBV_QP_STATE));
}

}  // namespace

Recycler::Recycler(EventLoop& loop, std::shared_ptr<rdmacm::CmChannel> channel,
                   rdma::ReleasedStructure released, bool wait_timewait, Duration timewait_limit,
                   Clock::time_point deadline, Done done)
    : loop_(loop),
      channel_(std::move(channel)),
      res_(std::move(released.res)),
      id_(std::move(released.id)),
      wait_timewait_(wait_timewait && id_),
      timewait_exited_(released.timewait_exited),
      timewait_limit_(timewait_limit),
      deadline_(deadline),
      done_(std::move(done)) {
  if (id_) channel_->attach(id_.get(), this);
}

Recycler::~Recycler() {
  unwatch();
  channel_->retire(std::move(id_));
}

Result<void> Recycler::start() {
  // ERR again in case the stream could not: flushing needs it, and it is idempotent.
  RMSG_TRY(modify_state(res_->qp.get(), IBV_QPS_ERR));
  // A QP in ERR flushes what is posted to it, in order: once this signalled marker's
  // completion is back, every earlier send (signalled or not) has completed or flushed.
  ibv_send_wr wr{};
  wr.wr_id = rdma::wire::make_wr_id(res_->generation, rdma::wire::WrKind::send, kMarkerIndex);
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  RMSG_TRY(verbs::check_rc(ibv_post_send(res_->qp.get(), &wr, &bad)));
  res_->send_sink.on_event = [this] { on_cq_event(true); };
  res_->recv_sink.on_event = [this] { on_cq_event(false); };
  for (const bool send : {true, false}) {
    auto& cq = send ? res_->send_cq : res_->recv_cq;
    RMSG_TRY(verbs::check_rc(ibv_req_notify_cq(cq.get(), 0)));
  }
  // Completions already queued raise no event: look once, from the loop.
  loop_.defer([this, alive = alive_.token()] {
    if (alive.alive() && phase_ == Phase::reaping) poll();
  });
  return {};
}

void Recycler::check_deadline(Clock::time_point now) {
  if (phase_ == Phase::timewait && now > timewait_deadline_) {
    stats_.timewait_missing = true;
    return finish(true);
  }
  if (phase_ != Phase::done && now > deadline_) {
    RMSG_LOG(warn, "recycling qp %u timed out (%s; marker %s, %u receives unreaped): destroyed",
             res_->qp->qp_num, phase_ == Phase::reaping ? "reaping" : "waiting for TIMEWAIT_EXIT",
             marker_seen_ ? "back" : "missing", res_->recv_posted);
    finish(false);
  }
}

// The loop's completion channel read one event of this CQ: count it, re-arm (a
// completion landing after the poll below raises a new event), poll.
void Recycler::on_cq_event(bool send) {
  auto& cq = send ? res_->send_cq : res_->recv_cq;
  cq.note_events(1);
  if (ibv_req_notify_cq(cq.get(), 0) != 0) return finish(false);
  poll();
}

void Recycler::poll() {
  if (!reap(res_->send_cq.get(), true) || !reap(res_->recv_cq.get(), false)) {
    return finish(false);
  }
  if (marker_seen_ && res_->recv_posted == 0) after_reaped();
}

bool Recycler::reap(ibv_cq* cq, bool send) {
  ibv_wc wc[kPollBatch];
  for (;;) {
    const int n = ibv_poll_cq(cq, kPollBatch, wc);
    if (n < 0) return false;
    for (int i = 0; i < n; ++i) {
      if (rdma::wire::wr_generation(wc[i].wr_id) != res_->generation) {
        ++stats_.stale;
        continue;
      }
      if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
        ++stats_.flushed;
      } else if (wc[i].status != IBV_WC_SUCCESS) {
        RMSG_LOG(warn, "recycling qp %u: %s completion: the QP failed, not reused",
                 res_->qp->qp_num, ibv_wc_status_str(wc[i].status));
        return false;
      }
      if (send) {
        if (rdma::wire::wr_index(wc[i].wr_id) == kMarkerIndex) marker_seen_ = true;
      } else if (res_->recv_posted == 0) {
        RMSG_LOG(warn, "recycling qp %u: more receive completions than receives posted",
                 res_->qp->qp_num);
        return false;
      } else {
        --res_->recv_posted;
      }
    }
    if (n < kPollBatch) return true;
  }
}

void Recycler::after_reaped() {
  unwatch();
  if (!modify_state(res_->qp.get(), IBV_QPS_RESET)) return finish(false);
  if (wait_timewait_ && !timewait_exited_) {
    phase_ = Phase::timewait;
    timewait_deadline_ = loop_.now() + timewait_limit_;
    return;
  }
  finish(true);
}

void Recycler::on_cm_event(const rdma_cm_event& event) {
  if (event.event != RDMA_CM_EVENT_TIMEWAIT_EXIT) return;  // DISCONNECTED: nothing to do
  timewait_exited_ = true;
  if (phase_ == Phase::timewait) finish(true);
}

void Recycler::finish(bool ok) {
  if (phase_ == Phase::done) return;
  phase_ = Phase::done;
  unwatch();
  alive_.end();
  auto done = std::move(done_);  // the callback may destroy this Recycler: nothing after it
  done(*this, ok);
}

void Recycler::unwatch() {
  if (!res_) return;  // taken
  res_->send_sink.on_event = {};
  res_->recv_sink.on_event = {};
}

}  // namespace rmsg::rdma
