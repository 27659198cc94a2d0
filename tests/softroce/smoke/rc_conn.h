// The two sides of an rdma_cm connection whose QP comes from rdma_create_qp, driven one
// event at a time (the caller reads the events, so one thread can drive both sides).
#pragma once

#include "softroce/smoke/cm_events.h"
#include "softroce/smoke/rc_endpoint.h"

namespace rmsg::softroce {

// Connection parameters of the smoke tests: one outstanding RDMA read each way, no RNR
// retries (receives are always posted before the peer may send: an RNR is a bug here).
rdma_conn_param smoke_conn_param();

class ClientConn {
 public:
  ClientConn(EventChannel& channel, RcEndpoint& endpoint) : ch_(channel), ep_(endpoint) {}

  // A new rdma_cm id resolving dst; a retry reaps and drops the previous id and its QP.
  ::testing::AssertionResult start(const sockaddr_in& dst);
  // Handles an event of this id: resolve route, build the endpoint (first time), create
  // the QP, post receives, connect. REJECTED / errors set the flags below.
  ::testing::AssertionResult on_event(const CmEvent& ev);
  ::testing::AssertionResult disconnect();

  rdma_cm_id* id() const { return id_.get(); }
  bool established = false;
  bool disconnected = false;
  bool failed = false;  // REJECTED, UNREACHABLE, ADDR_ERROR, ...
  CmEvent last_failure{};

 private:
  EventChannel& ch_;
  RcEndpoint& ep_;
  bool built_ = false;
  CmIdPtr id_;
};

class ServerConn {
 public:
  ServerConn(EventChannel& channel, RcEndpoint& endpoint) : ch_(channel), ep_(endpoint) {}

  ::testing::AssertionResult listen(const sockaddr_in& addr);
  // Accepts one connection (a second request is rejected); a DISCONNECTED is answered.
  ::testing::AssertionResult on_event(const CmEvent& ev);

  rdma_cm_id* listener() const { return listener_.get(); }
  rdma_cm_id* id() const { return id_.get(); }
  bool established = false;
  bool disconnected = false;

 private:
  EventChannel& ch_;
  RcEndpoint& ep_;
  CmIdPtr listener_;
  CmIdPtr id_;
};

}  // namespace rmsg::softroce
