// CmConnection: the rdma_cm state machine of one connection, active or passive, driven by
// the events CmChannel dispatches on the loop. Nothing here blocks.
//
//   active:  connect() -> rdma_resolve_addr -> ADDR_RESOLVED -> rdma_resolve_route ->
//            ROUTE_RESOLVED -> [acquire resources] -> QP INIT -> post receives ->
//            rdma_connect(qp_num, private data) -> CONNECT_RESPONSE -> check reply ->
//            INIT again (access flags now negotiated), RTR, RTS -> rdma_establish.
//            (With an application-owned QP no ESTABLISHED event follows on this side.)
//   passive: accept(CONNECT_REQUEST) -> [acquire resources] -> QP INIT -> post receives ->
//            RTR -> RTS -> rdma_accept(qp_num, private data) -> ESTABLISHED.
//
// The QP belongs to the delegate, obtained at one seam (Delegate::cm_acquire) so that a
// connection manager can hand a recycled QP to a new id. Every QP state change takes its
// attributes from rdma_init_qp_attr on the current id; retry_count, rnr_retry and the ACK
// timeout are then set from CmTuning (the QP's, not the CM's, values).
//
// Each step has a deadline: resolution steps pass theirs to rdma_cm, the handshake is
// timed by a loop timer. Failures reach Delegate::cm_failed once (DEVICE_REMOVAL after an
// earlier failure or disconnect calls it a second time, with Errc::device_error).
//
// An observer (set_observer, used by the connection manager) sees every step as it is
// entered; with one installed the connection arms no handshake timer of its own and gives
// rdma_cm twice the resolve timeout as a backstop: the observer enforces the step
// deadlines (expire()) from its periodic tick.
//
// DEVICE_REMOVAL fails the connection with Errc::device_error and retires its id at once
// (id() is null afterwards): the removal of the device waits for it.
//
// Threading: loop thread only. Delegate calls must not destroy the CmConnection (defer).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <system_error>

#include "rdmacm/cm_channel.h"
#include "rmsg/address.h"
#include "rmsg/event_loop.h"

namespace rmsg::rdmacm {

struct CmTuning {
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry_count = 0;
  std::uint8_t ack_timeout = 14;
  std::chrono::milliseconds resolve_timeout{2000};
  std::chrono::milliseconds connect_timeout{5000};
};

class CmConnection final : public CmEventHandler {
 public:
  class Delegate {
   public:
    // The resource seam, at ROUTE_RESOLVED (active; peer_private empty) or at
    // CONNECT_REQUEST (passive; the request's private data, zero-padded). Returns the QP
    // (in RESET) the connection will drive; an error fails (active) or rejects (passive).
    virtual Result<ibv_qp*> cm_acquire(rdma_cm_id* id, std::span<const std::byte> peer) = 0;
    // The QP is in INIT: post the receives (they must be there before the peer sends).
    virtual Result<void> cm_post_receives() = 0;
    // Our private data for rdma_connect / rdma_accept (at most 56 bytes).
    virtual std::span<const std::byte> cm_private_data() = 0;
    // Active side: the peer's reply (CONNECT_RESPONSE private data); an error fails.
    virtual Result<void> cm_check_reply(std::span<const std::byte> peer) = 0;
    // A REJECTED event (status: the CM reject reason) as the error to fail with.
    virtual std::error_code cm_rejected(int status, std::span<const std::byte> data) = 0;
    virtual void cm_established() = 0;
    // Setup failed, or an established connection got DISCONNECTED (Errc::connection_reset
    // from the state machine; the delegate knows whether the peer finished orderly).
    // With Errc::device_error (DEVICE_REMOVAL) the delegate must drop its verbs objects
    // now; that one comes even after an earlier failure or disconnect.
    virtual void cm_failed(std::error_code ec) = 0;
    virtual void cm_disconnected() = 0;

   protected:
    Delegate() = default;
    Delegate(const Delegate&) = default;
    Delegate& operator=(const Delegate&) = default;
    Delegate(Delegate&&) = default;
    Delegate& operator=(Delegate&&) = default;
    ~Delegate() = default;
  };

  // Setup steps as an observer sees them, in order (failed and gone may come any time).
  enum class Step {
    resolving,         // active: rdma_resolve_addr issued
    address_resolved,  // ADDR_RESOLVED, rdma_resolve_route issued
    route_resolved,    // ROUTE_RESOLVED, resources about to be acquired
    resources_ready,   // the delegate returned a QP (active and passive)
    connect_sent,      // rdma_connect / rdma_accept issued
    established,
    failed,  // setup failed (the delegate's cm_failed follows)
    gone,    // the CmConnection is being destroyed
  };
  using Observer = std::function<void(CmConnection&, Step)>;

  enum class State {
    idle,
    resolving_addr,
    resolving_route,
    connecting,
    accepting,
    established,
    disconnected,
    failed
  };

  CmConnection(std::shared_ptr<CmChannel> channel, Delegate& delegate, const CmTuning& tuning);
  CmConnection(const CmConnection&) = delete;
  CmConnection& operator=(const CmConnection&) = delete;
  CmConnection(CmConnection&&) = delete;
  CmConnection& operator=(CmConnection&&) = delete;
  // Disconnects if needed and retires the id (destroyed after any event being dispatched).
  ~CmConnection();

  // Active: starts resolving `peer`. Errors from rdma_create_id / rdma_resolve_addr.
  Result<void> connect(const SocketAddress& peer);
  // Passive, inside the listener's CONNECT_REQUEST dispatch: takes `event.id` and runs the
  // accept sequence. On error the request is rejected and the id retired.
  Result<void> accept(const rdma_cm_event& event);
  // Passive, outside any dispatch: as above for a request whose event was acked already
  // (a request handed over from another loop's listener, its id migrated to this
  // connection's channel); `request` is the request's private data.
  Result<void> accept(verbs::CmId id, std::span<const std::byte> request);
  // Sends a disconnect request if connected or connecting; idempotent.
  void disconnect();

  // Installs the step observer (before connect()/accept()). It must not destroy this
  // connection; it may call expire() later, from outside its own call.
  void set_observer(Observer observer) { observer_ = std::move(observer); }
  // Overrides the service level of the path (ah_attr.sl at RTR).
  void set_service_level(std::uint8_t sl) { service_level_ = sl; }
  // Fails the setup now with `ec` (a step deadline passed); no-op once established,
  // failed or disconnected.
  void expire(std::error_code ec);
  // Disconnects (if needed), detaches the id from this connection and hands it over: a
  // connection manager keeps it until TIMEWAIT_EXIT. Destroy it with CmChannel::retire.
  verbs::CmId release_id();
  // True once the id reported TIMEWAIT_EXIT (the peer's stale packets are gone).
  bool timewait_exited() const noexcept { return timewait_exited_; }
  // The status of a REJECTED event (the IB CM reject reason; 8: nothing listens), else 0.
  int reject_status() const noexcept { return reject_status_; }

  State state() const noexcept { return state_; }
  rdma_cm_id* id() const noexcept { return id_.get(); }

  void on_cm_event(const rdma_cm_event& event) override;

 private:
  Result<void> modify_qp(ibv_qp_state state);
  rdma_conn_param conn_param();
  void on_route_resolved();
  void on_connect_response(const rdma_cm_event& event);
  void on_disconnected();
  void on_device_removal();
  void fail(std::error_code ec);
  void arm_deadline();
  void cancel_deadline();
  void notify(Step step);

  std::shared_ptr<CmChannel> channel_;
  Delegate& delegate_;
  CmTuning tuning_;
  Observer observer_;
  std::optional<std::uint8_t> service_level_;
  bool timewait_exited_ = false;
  int reject_status_ = 0;
  State state_ = State::idle;
  ibv_qp* qp_ = nullptr;  // the delegate's
  TimerId deadline_ = 0;
  verbs::CmId id_;
};

// A CM event status as rmsg's error (negative errno from rdma_cm, or a positive IB CM
// reject reason).
std::error_code cm_event_error(const rdma_cm_event& event, Errc fallback);
// The private data of an event as bytes (empty if none).
std::span<const std::byte> cm_private_data(const rdma_cm_event& event);

}  // namespace rmsg::rdmacm
