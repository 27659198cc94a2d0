#include "softroce/smoke/rc_conn.h"

#include <cerrno>
#include <cstring>

namespace rmsg::softroce {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

namespace {
constexpr int kResolveMs = 5000;
ibv_qp_attr err_attr = [] {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  return a;
}();

AssertionResult cm_failure(const char* what) {
  return AssertionFailure() << what << " failed: " << std::strerror(errno);
}
}  // namespace

rdma_conn_param smoke_conn_param() {
  rdma_conn_param p{};
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 0;
  return p;
}

AssertionResult ClientConn::start(const sockaddr_in& dst) {
  if (id_ && id_->qp) {
    // A failed attempt: librdmacm moved its QP to ERR. Reap the flushed receives before
    // the CQs serve the next attempt's QP, or they would pass for the new QP's.
    if (int rc = ibv_modify_qp(id_->qp, &err_attr, IBV_QP_STATE)) {
      return AssertionFailure() << "ibv_modify_qp(ERR): " << std::strerror(rc);
    }
    if (auto r = ep_.reap_flushed(deadline_in(std::chrono::seconds(5))); !r) return r;
  }
  id_.reset();
  established = disconnected = failed = false;
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(ch_.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
    return cm_failure("rdma_create_id");
  id_.reset(raw);
  sockaddr_in to = dst;
  if (rdma_resolve_addr(raw, nullptr, reinterpret_cast<sockaddr*>(&to), kResolveMs) != 0) {
    return cm_failure("rdma_resolve_addr");
  }
  return AssertionSuccess();
}

AssertionResult ClientConn::on_event(const CmEvent& ev) {
  switch (ev.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id_.get(), kResolveMs) != 0) return cm_failure("rdma_resolve_route");
      return AssertionSuccess();
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (!built_) {
        if (auto r = ep_.create(id_->verbs); !r) return r;
        built_ = true;
      }
      if (auto r = ep_.create_qp_on(id_.get()); !r) return r;
      ep_.begin_generation(1);  // the peer checks it: the same for every attempt
      if (auto r = ep_.post_all_receives(); !r) return r;
      rdma_conn_param p = smoke_conn_param();
      if (rdma_connect(id_.get(), &p) != 0) return cm_failure("rdma_connect");
      return AssertionSuccess();
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      established = true;
      return AssertionSuccess();
    case RDMA_CM_EVENT_DISCONNECTED:
      disconnected = true;
      return AssertionSuccess();
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      failed = true;
      last_failure = ev;
      return AssertionSuccess();
    default:
      return AssertionFailure() << "client: unexpected " << describe(ev);
  }
}

AssertionResult ClientConn::disconnect() {
  if (rdma_disconnect(id_.get()) != 0) return cm_failure("rdma_disconnect");
  return AssertionSuccess();
}

AssertionResult ServerConn::listen(const sockaddr_in& addr) {
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(ch_.get(), &raw, nullptr, RDMA_PS_TCP) != 0)
    return cm_failure("rdma_create_id");
  listener_.reset(raw);
  sockaddr_in at = addr;
  if (rdma_bind_addr(raw, reinterpret_cast<sockaddr*>(&at)) != 0)
    return cm_failure("rdma_bind_addr");
  if (rdma_listen(raw, 4) != 0) return cm_failure("rdma_listen");
  return AssertionSuccess();
}

AssertionResult ServerConn::on_event(const CmEvent& ev) {
  switch (ev.type) {
    case RDMA_CM_EVENT_CONNECT_REQUEST: {
      if (id_) {
        rdma_reject(ev.id, nullptr, 0);
        rdma_destroy_id(ev.id);
        return AssertionFailure() << "server: a second connect request";
      }
      id_.reset(ev.id);
      if (auto r = ep_.create(ev.id->verbs); !r) return r;
      if (auto r = ep_.create_qp_on(ev.id); !r) return r;
      ep_.begin_generation(1);
      if (auto r = ep_.post_all_receives(); !r) return r;
      rdma_conn_param p = smoke_conn_param();
      if (rdma_accept(ev.id, &p) != 0) return cm_failure("rdma_accept");
      return AssertionSuccess();
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      established = true;
      return AssertionSuccess();
    case RDMA_CM_EVENT_DISCONNECTED:
      disconnected = true;
      if (rdma_disconnect(id_.get()) != 0) return cm_failure("rdma_disconnect (answer)");
      return AssertionSuccess();
    default:
      return AssertionFailure() << "server: unexpected " << describe(ev);
  }
}

}  // namespace rmsg::softroce
