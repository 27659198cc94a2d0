#include "rdmacm/cm_connection.h"

#include <cerrno>

#include "rmsg/log.h"

namespace rmsg::rdmacm {

std::error_code cm_event_error(const rdma_cm_event& event, Errc fallback) {
  if (event.status == -ETIMEDOUT) return make_error_code(Errc::timeout);
  return make_error_code(fallback);
}

std::span<const std::byte> cm_private_data(const rdma_cm_event& event) {
  const auto& conn = event.param.conn;
  if (conn.private_data == nullptr) return {};
  return {static_cast<const std::byte*>(conn.private_data), conn.private_data_len};
}

CmConnection::CmConnection(std::shared_ptr<CmChannel> channel, Delegate& delegate,
                           const CmTuning& tuning)
    : channel_(std::move(channel)), delegate_(delegate), tuning_(tuning) {}

CmConnection::~CmConnection() {
  cancel_deadline();
  disconnect();
  channel_->retire(std::move(id_));
  notify(Step::gone);
}

void CmConnection::notify(Step step) {
  if (observer_) observer_(*this, step);
}

void CmConnection::expire(std::error_code ec) {
  if (state_ == State::established) return;
  fail(ec);
}

verbs::CmId CmConnection::release_id() {
  cancel_deadline();
  disconnect();
  if (id_) channel_->detach(id_.get());
  return std::move(id_);
}

Result<void> CmConnection::connect(const SocketAddress& peer) {
  auto id = channel_->create_id(this);
  if (!id) return id.error();
  id_ = std::move(id).value();
  SocketAddress dst = peer;  // rdma_resolve_addr takes a non-const sockaddr
  state_ = State::resolving_addr;
  // Under an observer the step deadline is its tick's; rdma_cm's is only a backstop.
  const auto ms = static_cast<int>(tuning_.resolve_timeout.count()) * (observer_ ? 2 : 1);
  if (rdma_resolve_addr(id_.get(), nullptr, dst.sockaddr_ptr(), ms) != 0) {
    state_ = State::failed;
    return errno_code(errno);
  }
  notify(Step::resolving);
  return {};
}

// The same parameters for rdma_connect and rdma_accept: our private data, one
// outstanding RDMA read each way, and the QP's retry settings (the QP is ours).
rdma_conn_param CmConnection::conn_param() {
  const auto data = delegate_.cm_private_data();
  rdma_conn_param param{};
  param.private_data = data.data();
  param.private_data_len = static_cast<std::uint8_t>(data.size());
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = tuning_.retry_count;
  param.rnr_retry_count = tuning_.rnr_retry_count;
  param.qp_num = qp_->qp_num;
  return param;
}

Result<void> CmConnection::accept(const rdma_cm_event& event) {
  return accept(verbs::CmId(event.id), cm_private_data(event));
}

Result<void> CmConnection::accept(verbs::CmId id, std::span<const std::byte> request) {
  id_ = std::move(id);
  channel_->attach(id_.get(), this);
  state_ = State::accepting;
  auto run = [&]() -> Result<void> {
    auto qp = delegate_.cm_acquire(id_.get(), request);
    if (!qp) return qp.error();
    qp_ = qp.value();
    notify(Step::resources_ready);
    RMSG_TRY(modify_qp(IBV_QPS_INIT));
    RMSG_TRY(delegate_.cm_post_receives());
    RMSG_TRY(modify_qp(IBV_QPS_RTR));
    RMSG_TRY(modify_qp(IBV_QPS_RTS));
    rdma_conn_param param = conn_param();
    if (rdma_accept(id_.get(), &param) != 0) return errno_code(errno);
    return {};
  };
  if (auto r = run(); !r) {
    RMSG_LOG(warn, "rdma accept failed: %s", r.error().message().c_str());
    rdma_reject(id_.get(), nullptr, 0);
    state_ = State::failed;
    return r;
  }
  notify(Step::connect_sent);
  arm_deadline();
  return {};
}

void CmConnection::disconnect() {
  if (state_ == State::connecting || state_ == State::accepting || state_ == State::established) {
    rdma_disconnect(id_.get());  // errors: the id is already disconnected
    state_ = State::disconnected;
  }
}

Result<void> CmConnection::modify_qp(ibv_qp_state state) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = state;
  if (rdma_init_qp_attr(id_.get(), &attr, &mask) != 0) return errno_code(errno);
  if (state == IBV_QPS_INIT) {
    // The peer's window probe is a zero-length RDMA WRITE (docs/protocol.md, Keepalive).
    // The CM already grants it; no MR allows remote access, so nothing becomes writable.
    attr.qp_access_flags |= IBV_ACCESS_REMOTE_WRITE;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  if (state == IBV_QPS_RTR && service_level_) attr.ah_attr.sl = *service_level_;
  if (state == IBV_QPS_RTS) {
    attr.timeout = tuning_.ack_timeout;
    attr.retry_cnt = tuning_.retry_count;
    attr.rnr_retry = tuning_.rnr_retry_count;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
  }
  return verbs::check_rc(ibv_modify_qp(qp_, &attr, mask));
}

void CmConnection::on_cm_event(const rdma_cm_event& event) {
  RMSG_LOG(debug, "rdma_cm %s status %d", rdma_event_str(event.event), event.status);
  switch (event.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (state_ != State::resolving_addr) return;
      state_ = State::resolving_route;
      if (rdma_resolve_route(id_.get(), static_cast<int>(tuning_.resolve_timeout.count()) *
                                            (observer_ ? 2 : 1)) != 0) {
        return fail(errno_code(errno));
      }
      return notify(Step::address_resolved);
    case RDMA_CM_EVENT_ADDR_ERROR:
      return fail(cm_event_error(event, Errc::address_error));
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (state_ == State::resolving_route) on_route_resolved();
      return;
    case RDMA_CM_EVENT_ROUTE_ERROR:
      return fail(cm_event_error(event, Errc::route_error));
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      if (state_ == State::connecting) on_connect_response(event);
      return;
    case RDMA_CM_EVENT_ESTABLISHED:
      if (state_ != State::accepting) return;
      cancel_deadline();
      state_ = State::established;
      notify(Step::established);
      delegate_.cm_established();
      return;
    case RDMA_CM_EVENT_REJECTED:
      reject_status_ = event.status;
      return fail(delegate_.cm_rejected(event.status, cm_private_data(event)));
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      return fail(cm_event_error(event, Errc::unreachable));
    case RDMA_CM_EVENT_DISCONNECTED:
      return on_disconnected();
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return on_device_removal();
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      timewait_exited_ = true;
      return;
    case RDMA_CM_EVENT_ADDR_CHANGE:  // the local address moved: this QP's path is gone
      return fail(make_error_code(Errc::address_error));
    default:
      return;
  }
}

void CmConnection::on_route_resolved() {
  notify(Step::route_resolved);
  auto run = [&]() -> Result<void> {
    auto qp = delegate_.cm_acquire(id_.get(), {});
    if (!qp) return qp.error();
    qp_ = qp.value();
    notify(Step::resources_ready);
    RMSG_TRY(modify_qp(IBV_QPS_INIT));
    RMSG_TRY(delegate_.cm_post_receives());
    rdma_conn_param param = conn_param();
    if (rdma_connect(id_.get(), &param) != 0) return errno_code(errno);
    return {};
  };
  if (auto r = run(); !r) return fail(r.error());
  state_ = State::connecting;
  notify(Step::connect_sent);
  arm_deadline();
}

void CmConnection::on_connect_response(const rdma_cm_event& event) {
  auto run = [&]() -> Result<void> {
    RMSG_TRY(delegate_.cm_check_reply(cm_private_data(event)));
    // Access flags are negotiated by now: INIT again, as librdmacm does for its own QPs.
    RMSG_TRY(modify_qp(IBV_QPS_INIT));
    RMSG_TRY(modify_qp(IBV_QPS_RTR));
    RMSG_TRY(modify_qp(IBV_QPS_RTS));
    if (rdma_establish(id_.get()) != 0) return errno_code(errno);
    return {};
  };
  if (auto r = run(); !r) return fail(r.error());
  cancel_deadline();
  state_ = State::established;
  notify(Step::established);
  delegate_.cm_established();
}

void CmConnection::on_disconnected() {
  if (state_ == State::established) {
    rdma_disconnect(id_.get());  // the reply that completes the exchange
    state_ = State::disconnected;
    delegate_.cm_disconnected();
  } else if (state_ == State::connecting || state_ == State::accepting) {
    fail(make_error_code(Errc::connection_reset));
  }
}

// The removal of the device waits for every id and verbs object on it: the delegate drops
// its resources in cm_failed, and the id goes now rather than when the owner is closed
// (the kernel has destroyed its side already; librdmacm keeps the device open while any
// id on it lives). A connection that had failed or disconnected before (its peer's
// removal event came first, say) tells its delegate again: its resources must go too.
void CmConnection::on_device_removal() {
  const auto ec = make_error_code(Errc::device_error);
  if (state_ == State::failed || state_ == State::disconnected) {
    cancel_deadline();
    state_ = State::failed;
    delegate_.cm_failed(ec);
  } else {
    fail(ec);
  }
  channel_->retire(std::move(id_));
}

void CmConnection::fail(std::error_code ec) {
  if (state_ == State::failed || state_ == State::disconnected) return;
  cancel_deadline();
  disconnect();
  state_ = State::failed;
  notify(Step::failed);
  delegate_.cm_failed(ec);
}

void CmConnection::arm_deadline() {
  cancel_deadline();
  if (observer_) return;  // the observer's tick enforces the handshake deadline
  deadline_ = channel_->loop().add_timer(tuning_.connect_timeout, [this] {
    deadline_ = 0;
    fail(make_error_code(Errc::timeout));
  });
}

void CmConnection::cancel_deadline() {
  if (deadline_ != 0) channel_->loop().cancel_timer(std::exchange(deadline_, 0));
}

}  // namespace rmsg::rdmacm
