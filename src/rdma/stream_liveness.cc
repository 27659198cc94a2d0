// RdmaStream: control path — keepalive and idle timeout (docs/protocol.md, Keepalive;
// they keep running while the stream lingers),
// asynchronous device events, and the active connect's ownership (released, with
// Errc::cancelled, when the loop is destroyed first).
#include <algorithm>

#include "rdma/rdma_stream.h"
#include "rmsg/log.h"
#include "stream/stream_access.h"

namespace rmsg::rdma {
namespace {

bool fails_stream(ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_DEVICE_FATAL:
      return true;
    default:
      return false;
  }
}

}  // namespace

void RdmaStream::hold_self(std::unique_ptr<RdmaStream> self) {
  self_ = std::move(self);
  destroy_hook_ = loop_.add_destroy_hook([this] {
    destroy_hook_ = 0;
    if (!setup_done_) return release_self().reset();
    auto done = std::move(setup_done_);
    setup_done_ = {};
    done(make_error_code(Errc::cancelled));  // releases and destroys this stream
  });
}

std::unique_ptr<RdmaStream> RdmaStream::release_self() {
  if (destroy_hook_ != 0) loop_.remove_destroy_hook(std::exchange(destroy_hook_, 0));
  return std::move(self_);
}

Result<void> RdmaStream::watch_device(rdma_cm_id* id) {
  counters_ = std::make_unique<StreamCounters>(ibv_get_device_name(id->verbs->device));
  verbs::AsyncTarget target{
      id->verbs, res_->qp.get(), {res_->send_cq.get(), res_->recv_cq.get()}, id->port_num};
  auto reg = verbs::watch_async_events(loop_, target,
                                       [this](const verbs::AsyncEvent& ev) { on_async_event(ev); });
  if (!reg) return reg.error();
  async_ = std::move(reg).value();
  return {};
}

void RdmaStream::on_async_event(const verbs::AsyncEvent& ev) {
  if (counters_) counters_->async_event(ev.type);
  if (ev.type == IBV_EVENT_COMM_EST && cm_ && cm_->id() && conn_ == ConnState::connecting) {
    // Data arrived before the CM's RTU: let the CM establish the connection now.
    rdma_notify(cm_->id(), IBV_EVENT_COMM_EST);
    return;
  }
  if (!fails_stream(ev.type)) return;
  RMSG_LOG(warn, "rdma stream: device event %s", ibv_event_type_str(ev.type));
  fail(make_async_event_error(ev.type));
}

// DEVICE_REMOVAL: the device's resources must go at once (the removal waits for them);
// bytes received but not read are lost with the ring.
void RdmaStream::drop_device_resources() {
  stop_liveness();
  async_.reset();
  recv_ring_.clear();
  if (res_) unwatch_completions();
  res_.reset();
}

void RdmaStream::start_liveness() {
  const auto ka = options_.keepalive_interval;
  const auto idle = options_.idle_timeout;
  if (ka.count() <= 0 && idle.count() <= 0) return;
  const auto period = ka.count() > 0 ? ka : std::max(idle / 4, std::chrono::milliseconds(1));
  liveness_timer_ = loop_.add_periodic(period, [this] { on_liveness_tick(); });
  // The first keepalive announces that this side sends them (the peer's idle timeout
  // arms only then: a peer that never sends any is never timed out).
  tx_seen_ = tx_messages_;
  if (ka.count() > 0 && credits_.can_send_data() && sq_free() >= 2) {
    if (auto r = post_message(wire::MsgType::keepalive, nullptr, 0); !r) return fail(r.error());
    if (counters_) counters_->keepalives_sent.add();
  }
}

void RdmaStream::stop_liveness() {
  if (liveness_timer_ != 0) loop_.cancel_timer(std::exchange(liveness_timer_, 0));
}

// What the peer may send us at most: receives posted here and already announced to it.
bool RdmaStream::peer_can_send() const {
  const std::uint64_t held = std::uint64_t{recv_ring_.queued()} + credits_.owed();
  return (pool_ ? window_lease_.window() : geometry_.recv_block_count) >=
         held + 2;  // data and keepalives need 2 credits
}

// Runs on through a linger: a lingering stream whose FIN waits for credits has nothing
// else in flight, so only its probes and the idle timeout can tell a dead peer (which
// ends the linger abortively, by fail()) from a live one that is slow to read.
void RdmaStream::on_liveness_tick() {
  if (error_ || qp_error_ || !running() || !res_) return stop_liveness();
  if (leasing()) release_lease();  // an idle sender gives its lease back
  const bool idle_tx = tx_messages_ == tx_seen_;
  if (idle_tx && options_.keepalive_interval.count() > 0 && sq_free() >= 2) {
    if (credits_.can_send_data()) {
      if (auto r = post_message(wire::MsgType::keepalive, nullptr, 0); !r) return fail(r.error());
      if (counters_) counters_->keepalives_sent.add();
    } else if (send_ring_.marked_done()) {  // stalled on credits, no probe in flight
      if (auto r = post_probe(); !r) return fail(r.error());
    }
  }
  tx_seen_ = tx_messages_;
  if (options_.idle_timeout.count() <= 0) return;
  if (rx_messages_ != rx_seen_ || !peer_keepalive_ || !peer_can_send()) {
    rx_seen_ = rx_messages_;
    idle_ticks_ = 0;
    return;
  }
  const auto period = options_.keepalive_interval.count() > 0
                          ? options_.keepalive_interval
                          : std::max(options_.idle_timeout / 4, std::chrono::milliseconds(1));
  if (++idle_ticks_ * period < options_.idle_timeout) return;
  RMSG_LOG(warn, "rdma stream: nothing from the peer for %lld ms",
           static_cast<long long>(options_.idle_timeout.count()));
  if (counters_) counters_->idle_timeouts.add();
  fail(make_error_code(Errc::timeout));
}

}  // namespace rmsg::rdma

namespace rmsg {

const CounterSet* rdma_stream_counters(const Stream& stream) {
  const auto* s = detail::StreamAccess::as<const rdma::RdmaStream>(stream);
  return s == nullptr ? nullptr : s->counters();
}

}  // namespace rmsg
