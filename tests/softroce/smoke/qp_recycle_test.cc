// The spike the connection manager's reuse rests on: an RC QP that the application owns
// (ibv_create_qp on its own PD, not rdma_create_qp) is driven INIT -> RTR -> RTS with
// rdma_init_qp_attr on the current rdma_cm id and connected with conn_param.qp_num. After a
// disconnect the same QP goes ERR, its flushed completions are reaped, it goes RESET, and
// a NEW rdma_cm id connects it again: same QP number, same CQs, same MR, traffic checked.
// Work-request ids carry the connection's generation: a stale completion fails the test.
//
// Found on rxe (Debian 6.1 kernel) by ../README.md's spike: rdma_disconnect leaves an
// application-owned QP alone (we move it to ERR); the client must apply INIT again on
// CONNECT_RESPONSE (access flags are negotiated by then) and gets no ESTABLISHED event
// (rdma_establish); TIMEWAIT_EXIT comes ~2 s after DISCONNECTED and is not needed before
// reuse; an ibv_post_send on a RESET QP returns EINVAL yet rxe sends it after the next
// connect, so a QP is posted to only while our own state says RTS.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "softroce/smoke/cm_events.h"
#include "softroce/smoke/ping_pong.h"
#include "softroce/smoke/rc_endpoint.h"

namespace rmsg::softroce {
namespace {

using namespace std::chrono_literals;
using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

constexpr std::uint16_t kPort = 18517;
constexpr std::uint32_t kMessages = 100;

// Every state change of a connecting QP: the attributes rdma_cm computed for this id.
AssertionResult modify_via_cm(rdma_cm_id* id, ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = state;
  if (rdma_init_qp_attr(id, &attr, &mask) != 0) {
    return AssertionFailure() << "rdma_init_qp_attr(" << state << "): " << std::strerror(errno);
  }
  if (int rc = ibv_modify_qp(qp, &attr, mask)) {
    return AssertionFailure() << "ibv_modify_qp(" << state << "): " << std::strerror(rc);
  }
  return AssertionSuccess();
}

AssertionResult modify_state(ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr attr{};
  attr.qp_state = state;
  if (int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE)) {
    return AssertionFailure() << "ibv_modify_qp(" << state << "): " << std::strerror(rc);
  }
  return AssertionSuccess();
}

rdma_conn_param conn_param(std::uint32_t qp_num) {
  rdma_conn_param p{};
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.qp_num = qp_num;
  return p;
}

// One connection's progress on one side.
struct Conn {
  CmIdPtr id;
  bool established = false;
  bool disconnected = false;
  bool timewait_exit = false;
};

class QpRecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    auto addr = ipv4(guest_addr(), kPort);
    ASSERT_TRUE(addr) << "RMSG_RDMA_ADDR='" << guest_addr() << "': run me with tests/softroce/run";
    addr_ = *addr;
    ASSERT_TRUE(client_ch_.ok() && server_ch_.ok());
    rdma_cm_id* raw = nullptr;
    ASSERT_EQ(rdma_create_id(server_ch_.get(), &raw, nullptr, RDMA_PS_TCP), 0);
    listener_.reset(raw);
    ASSERT_EQ(rdma_bind_addr(raw, reinterpret_cast<sockaddr*>(&addr_)), 0) << std::strerror(errno);
    ASSERT_EQ(rdma_listen(raw, 4), 0) << std::strerror(errno);
  }

  AssertionResult connect(std::uint32_t gen);
  AssertionResult on_client_event(const CmEvent& ev, std::uint32_t gen);
  AssertionResult on_server_event(const CmEvent& ev, std::uint32_t gen);
  AssertionResult disconnect(bool wait_timewait_exit);
  // Drives events of both channels to the handlers until done() or the deadline.
  template <class Done>
  AssertionResult pump(Done done, std::uint32_t gen, Deadline deadline);

  EventChannel client_ch_, server_ch_;
  RcEndpoint client_ep_, server_ep_;  // QP, CQs, MR: kept across connections
  bool server_srq_ = false;           // the server's QP takes its receives from an SRQ
  CmIdPtr listener_;
  Conn client_, server_;  // the current connection's ids: destroyed first
  sockaddr_in addr_{};
};

template <class Done>
AssertionResult QpRecycle::pump(Done done, std::uint32_t gen, Deadline deadline) {
  EventChannel* channels[] = {&client_ch_, &server_ch_};
  while (!done()) {
    auto ev = next_event(channels, deadline);
    if (!ev) return AssertionFailure() << "deadline passed";
    auto r = ev->channel == 0 ? on_client_event(*ev, gen) : on_server_event(*ev, gen);
    if (!r) return r;
  }
  return AssertionSuccess();
}

AssertionResult QpRecycle::connect(std::uint32_t gen) {
  client_ = Conn{};
  server_ = Conn{};
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(client_ch_.get(), &raw, nullptr, RDMA_PS_TCP) != 0) {
    return AssertionFailure() << "rdma_create_id: " << std::strerror(errno);
  }
  client_.id.reset(raw);
  if (rdma_resolve_addr(raw, nullptr, reinterpret_cast<sockaddr*>(&addr_), 5000) != 0) {
    return AssertionFailure() << "rdma_resolve_addr: " << std::strerror(errno);
  }
  return pump([&] { return client_.established && server_.established; }, gen, deadline_in(30s));
}

// First connection: build the endpoint and its own QP; later ones: the same QP in RESET.
AssertionResult ensure_endpoint(RcEndpoint& ep, rdma_cm_id* id, bool srq = false) {
  if (ep.qp()) {
    if (ep.qp()->context != id->verbs) return AssertionFailure() << "new id on another device";
    return AssertionSuccess();
  }
  if (auto r = ep.create(id->verbs, srq); !r) return r;
  return ep.create_own_qp();
}

AssertionResult QpRecycle::on_client_event(const CmEvent& ev, std::uint32_t gen) {
  if (ev.id != client_.id.get()) return AssertionFailure() << "client: event for an old id";
  rdma_cm_id* id = ev.id;
  ibv_qp* qp = client_ep_.qp();
  switch (ev.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id, 5000) == 0) return AssertionSuccess();
      return AssertionFailure() << "rdma_resolve_route: " << std::strerror(errno);
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (auto r = ensure_endpoint(client_ep_, id); !r) return r;
      if (auto r = modify_via_cm(id, client_ep_.qp(), IBV_QPS_INIT); !r) return r;
      client_ep_.begin_generation(gen);
      if (auto r = client_ep_.post_all_receives(); !r) return r;
      rdma_conn_param p = conn_param(client_ep_.qp()->qp_num);
      if (rdma_connect(id, &p) == 0) return AssertionSuccess();
      return AssertionFailure() << "rdma_connect: " << std::strerror(errno);
    }
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      if (ev.peer_qp_num != server_ep_.qp()->qp_num) {
        return AssertionFailure() << "CONNECT_RESPONSE names QP " << ev.peer_qp_num;
      }
      for (auto state : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
        if (auto r = modify_via_cm(id, qp, state); !r) return r;
      }
      if (rdma_establish(id) != 0) return AssertionFailure() << "rdma_establish failed";
      client_.established = true;
      return AssertionSuccess();
    case RDMA_CM_EVENT_DISCONNECTED:
      client_.disconnected = true;
      return AssertionSuccess();
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      client_.timewait_exit = true;
      return AssertionSuccess();
    default:
      return AssertionFailure() << "client: unexpected " << describe(ev);
  }
}

AssertionResult QpRecycle::on_server_event(const CmEvent& ev, std::uint32_t gen) {
  if (ev.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    if (server_.id) return AssertionFailure() << "server: a second connect request";
    server_.id.reset(ev.id);
    if (auto r = ensure_endpoint(server_ep_, ev.id, server_srq_); !r) return r;
    if (ev.peer_qp_num != client_ep_.qp()->qp_num) {
      return AssertionFailure() << "CONNECT_REQUEST names QP " << ev.peer_qp_num;
    }
    if (auto r = modify_via_cm(ev.id, server_ep_.qp(), IBV_QPS_INIT); !r) return r;
    server_ep_.begin_generation(gen);
    if (auto r = server_ep_.post_all_receives(); !r) return r;
    for (auto state : {IBV_QPS_RTR, IBV_QPS_RTS}) {
      if (auto r = modify_via_cm(ev.id, server_ep_.qp(), state); !r) return r;
    }
    rdma_conn_param p = conn_param(server_ep_.qp()->qp_num);
    if (rdma_accept(ev.id, &p) == 0) return AssertionSuccess();
    return AssertionFailure() << "rdma_accept: " << std::strerror(errno);
  }
  if (ev.id != server_.id.get()) return AssertionFailure() << "server: event for an old id";
  switch (ev.type) {
    case RDMA_CM_EVENT_ESTABLISHED:
      server_.established = true;
      return AssertionSuccess();
    case RDMA_CM_EVENT_DISCONNECTED:
      server_.disconnected = true;
      if (rdma_disconnect(ev.id) == 0) return AssertionSuccess();
      return AssertionFailure() << "rdma_disconnect (answer): " << std::strerror(errno);
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      server_.timewait_exit = true;
      return AssertionSuccess();
    default:
      return AssertionFailure() << "server: unexpected " << describe(ev);
  }
}

AssertionResult QpRecycle::disconnect(bool wait_timewait_exit) {
  if (rdma_disconnect(client_.id.get()) != 0) {
    return AssertionFailure() << "rdma_disconnect: " << std::strerror(errno);
  }
  auto done = [&] {
    bool disc = client_.disconnected && server_.disconnected;
    return disc && (!wait_timewait_exit || (client_.timewait_exit && server_.timewait_exit));
  };
  if (auto r = pump(done, 0, deadline_in(15s)); !r) return r;
  client_ = Conn{};  // destroys the ids; their QP lives on
  server_ = Conn{};
  return AssertionSuccess();
}

// The QP of a closed connection back to RESET, ready for a new id: ERR flushes every
// posted receive; reaping them all before RESET leaves nothing stale in the CQs.
AssertionResult recycle(RcEndpoint& ep) {
  int posted = ep.receives_posted();
  if (auto r = modify_state(ep.qp(), IBV_QPS_ERR); !r) return r;
  if (auto r = ep.reap_flushed(deadline_in(5s)); !r) return r;
  if (ep.flushed() != posted) {
    return AssertionFailure() << "flushed " << ep.flushed() << " of " << posted << " receives";
  }
  if (auto r = modify_state(ep.qp(), IBV_QPS_RESET); !r) return r;
  return ep.expect_quiet(20ms);
}

TEST_F(QpRecycle, OwnQpCarriesTrafficAgainOnNewCmIdsAfterErrReapReset) {
  std::uint32_t client_qpn = 0, server_qpn = 0;
  ibv_cq* cqs[4] = {};
  ibv_mr* mrs[2] = {};
  // Generation 1 builds the QPs; 2 reuses them after TIMEWAIT_EXIT; 3 and 4 reuse them
  // right after DISCONNECTED.
  for (std::uint32_t gen = 1; gen <= 4; ++gen) {
    SCOPED_TRACE("generation " + std::to_string(gen));
    auto start = SteadyClock::now();
    ASSERT_TRUE(connect(gen));
    double connect_ms = ms_since(start);
    if (gen == 1) {
      client_qpn = client_ep_.qp()->qp_num;
      server_qpn = server_ep_.qp()->qp_num;
      ibv_cq* now[4] = {client_ep_.send_cq(), client_ep_.recv_cq(), server_ep_.send_cq(),
                        server_ep_.recv_cq()};
      std::copy(std::begin(now), std::end(now), cqs);
      mrs[0] = client_ep_.mr();
      mrs[1] = server_ep_.mr();
    }
    EXPECT_EQ(client_ep_.qp()->qp_num, client_qpn);
    EXPECT_EQ(server_ep_.qp()->qp_num, server_qpn);
    EXPECT_EQ(client_ep_.send_cq(), cqs[0]);
    EXPECT_EQ(server_ep_.recv_cq(), cqs[3]);
    EXPECT_EQ(client_ep_.mr(), mrs[0]);
    EXPECT_EQ(server_ep_.mr(), mrs[1]);

    ASSERT_TRUE(ping_pong(&client_ep_, &server_ep_, kMessages, deadline_in(30s)));
    start = SteadyClock::now();
    ASSERT_TRUE(disconnect(/*wait_timewait_exit=*/gen <= 2));
    double disconnect_ms = ms_since(start);
    start = SteadyClock::now();
    ASSERT_TRUE(recycle(client_ep_)) << "client";
    ASSERT_TRUE(recycle(server_ep_)) << "server";
    std::printf(
        "generation %u: %s connect %.1f ms, %u ping-pongs, disconnect %.1f ms%s, "
        "ERR+reap+RESET %.1f ms (flushed %d + %d)\n",
        gen, gen == 1 ? "fresh" : "reused", connect_ms, kMessages, disconnect_ms,
        gen <= 2 ? " (with TIMEWAIT_EXIT)" : "", ms_since(start), client_ep_.flushed(),
        server_ep_.flushed());
  }
}

// The same QP reuse with the server's QP on a shared receive queue, and a burst of its
// peer's SENDs around the moment it goes to ERR. rxe in Debian's 6.1 kernel raises no
// IBV_EVENT_QP_LAST_WQE_REACHED, and a QP in ERR does not flush the SRQ's receives (any
// QP may still take them). What it does instead: the receive a message had taken when the
// QP went to ERR completes (flushed) from the responder, which takes nothing new from the
// SRQ; moving the QP to RESET stops the responder, so every completion of the old
// connection is in the CQ once RESET returns. The order proven here: ERR, RESET, reap the
// receive CQ (each leftover counted and its buffer posted again), then the next
// connection - which sees no message of an earlier one (the header's generation is checked
// on every message), finds the CQ quiet, and receives a burst of exactly as many SENDs as
// the SRQ should hold without an RNR (rnr_retry 0): no receive was lost by the recycling.
TEST_F(QpRecycle, SrqQpResetAfterErrLeavesNoCompletionForTheNextConnection) {
  server_srq_ = true;
  int stale_total = 0, last_wqe_events = 0;
  for (std::uint32_t gen = 1; gen <= 4; ++gen) {
    SCOPED_TRACE("generation " + std::to_string(gen));
    ASSERT_TRUE(connect(gen));
    ASSERT_NE(server_ep_.srq(), nullptr);
    ASSERT_TRUE(ping_pong(&client_ep_, &server_ep_, kMessages, deadline_in(30s)));
    // A burst of as many SENDs as the SRQ holds receives, none re-posted until all landed.
    const auto burst = static_cast<std::uint32_t>(server_ep_.receives_posted());
    ASSERT_EQ(burst, static_cast<std::uint32_t>(RcEndpoint::kSlots));
    for (std::uint32_t i = 0; i < burst; ++i) ASSERT_TRUE(client_ep_.send(kMessages + i, 0));
    auto none = [](std::uint32_t) { return AssertionSuccess(); };
    const auto deadline = deadline_in(30s);
    while (client_ep_.sends_outstanding() > 0) {
      ASSERT_TRUE(client_ep_.poll(1, none)) << "an SRQ receive is missing";
      ASSERT_LT(SteadyClock::now(), deadline);
    }
    while (server_ep_.received() < kMessages + burst) {
      ASSERT_TRUE(server_ep_.poll(0, none));
      ASSERT_LT(SteadyClock::now(), deadline);
    }
    // Another burst, the server's QP going to ERR right after it (odd generations: under
    // Soft-RoCE the SENDs have landed by then) or right before it (even ones: they arrive
    // at a QP in ERR, which must take no receive from the SRQ).
    const bool err_first = gen % 2 == 0;
    if (err_first) {
      ASSERT_TRUE(modify_state(server_ep_.qp(), IBV_QPS_ERR));
    }
    for (std::uint32_t i = 0; i < burst; ++i) {
      ASSERT_TRUE(client_ep_.send(kMessages + burst + i, 0));
    }
    if (!err_first) {
      ASSERT_TRUE(modify_state(server_ep_.qp(), IBV_QPS_ERR));
    }
    ASSERT_TRUE(modify_state(server_ep_.qp(), IBV_QPS_RESET));
    ASSERT_TRUE(server_ep_.reap_srq_leftovers());
    ASSERT_TRUE(server_ep_.expect_quiet(20ms));
    if (err_first) {
      EXPECT_EQ(server_ep_.stale_receives(), 0) << "a QP in ERR took SRQ receives";
    }
    stale_total += server_ep_.stale_receives();
    ASSERT_TRUE(disconnect(/*wait_timewait_exit=*/false));
    ASSERT_TRUE(modify_state(client_ep_.qp(), IBV_QPS_ERR));
    ASSERT_TRUE(client_ep_.reap_flushed(deadline_in(5s), /*sends_may_succeed=*/true));
    ASSERT_TRUE(modify_state(client_ep_.qp(), IBV_QPS_RESET));
    // What the device reported meanwhile (non-blocking: none may be queued).
    ibv_context* ctx = server_ep_.qp()->context;
    const int flags = fcntl(ctx->async_fd, F_GETFL);
    fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
    ibv_async_event ev{};
    while (ibv_get_async_event(ctx, &ev) == 0) {
      if (ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED) ++last_wqe_events;
      std::printf("generation %u: async event %s\n", gen, ibv_event_type_str(ev.event_type));
      ibv_ack_async_event(&ev);
    }
    fcntl(ctx->async_fd, F_SETFL, flags);
    std::printf("generation %u: ERR %s the burst: %d of %u messages left in the CQ after RESET\n",
                gen, err_first ? "before" : "after", server_ep_.stale_receives(), burst);
  }
  std::printf("stale receive completions reaped before reuse: %d; LAST_WQE_REACHED events: %d\n",
              stale_total, last_wqe_events);
}

}  // namespace
}  // namespace rmsg::softroce
