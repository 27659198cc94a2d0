// ConnectionManager: asks for connections by parameters, reuses RDMA connection
// structures whose reuse key matches, and drives every setup from its EventLoop, so a
// client and a server in one thread connect to each other and no thread waits for a peer.
// Design, counters and measured numbers: docs/connection-manager.md.
//
// Reuse (RDMA): a closed stream's structure (QP, send/receive CQs and completion
// channels, registered rings; the PD is shared per device) is recycled — QP to ERR, its
// flushed completions reaped, QP to RESET, and (by default) its old rdma_cm id kept until
// TIMEWAIT_EXIT — then parked idle under its ReuseKey in a pool bounded in size and idle
// time. A connect whose key matches takes it: a new rdma_cm id, no new QP, CQ or memory
// registration. A structure whose QP failed is destroyed, never reused. TCP connections
// are not pooled at this layer (only a message layer can share a byte stream).
//
// Threading: one manager per EventLoop; every method is loop-thread-only, every callback
// runs on the loop thread. No thread is created. The loop must outlive the manager. The
// one thing that crosses threads is an AcceptTarget (routing accepts, below): any thread
// may hold and copy one; a listener's loop hands connect requests to it by posting to the
// target's loop (EventLoop::post), nothing else.
// Ownership: streams handed out are the caller's; they may outlive the manager (their
// structures are then destroyed on close instead of recycled). Destroying the manager
// cancels pending connects: their callbacks still run exactly once, later on the loop,
// with Errc::cancelled; idle and recycling structures are destroyed.
//
// Errors a connect reports (besides those of rmsg/stream.h and rmsg/rdma.h):
//   ConnectErrc::address_timeout / route_timeout / handshake_timeout: that step's
//     deadline passed (each is equivalent to std::errc::timed_out);
//   Errc::connection_refused (nothing listens: the CM's reject status 8), Errc::rejected
//     (any other reject; ConnectReport::reject_status has the CM's status),
//     Errc::unreachable, Errc::address_error, Errc::route_error,
//     Errc::resource_exhausted (the peer had no resources), Errc::invalid_argument (bad
//     parameters, or `device`/`device_port` do not match the route), Errc::not_supported
//     (RDMA asked of a build without it), Errc::cancelled (the manager went away),
//     ConnectErrc::connection_limit (max_connections live connections already: at once,
//     nothing sent to the peer).
//
// Connection limit (ConnectionManagerOptions::max_connections): one bound over both
// transports on the connections this manager made or accepted and has not yet really
// released - connecting, established (handed out, until the stream is closed or
// destroyed) and lingering after a graceful close (until the linger ends). Over it,
// connect() fails at once with ConnectErrc::connection_limit, an RDMA connect request is
// rejected (the peer's connect fails with Errc::resource_exhausted) and an accepted TCP
// connection is closed at once (abortive: the peer reads a reset); each is counted.
//
// Routing RDMA accepts to another loop (docs/connection-manager.md, "Routing accepts"):
// librdmacm queues every connect request on the listener's event channel, so the loop
// that listens gets them all. A listener given an AcceptRouter asks it, per request, with
// the connector's ConnectionParams::affinity, which manager accepts it; a request routed
// elsewhere is moved (rdma_migrate_id) to the target loop's rdma_cm channel BEFORE any
// verbs object is built, and the target builds (or reuses, from its own pool) the
// structure on its own loop and delivers the stream to its own accept_routed() callback.
// A request routed to a target that is gone (its manager destroyed) or whose
// max_connections is reached is rejected (the peer's connect fails with
// Errc::resource_exhausted); so is one whose migration fails.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

#include "rmsg/address.h"
#include "rmsg/counters.h"
#include "rmsg/event_loop.h"
#include "rmsg/export.h"
#include "rmsg/rdma.h"
#include "rmsg/result.h"
#include "rmsg/stream.h"
#include "rmsg/tcp.h"

namespace rmsg {

enum class Transport : std::uint8_t { tcp = 1, rdma = 2 };
RMSG_EXPORT const char* to_string(Transport t) noexcept;

// What an application asks for: where to, over what, and with which parameters.
struct RMSG_EXPORT ConnectionParams {
  Transport transport = Transport::rdma;
  SocketAddress peer;  // connect: the peer's address and port (numeric); listen: unused
  // RDMA: the local device and port the connection must use ("" / 0: whichever the route
  // to the peer picks). A route to another device fails with Errc::invalid_argument.
  std::string device;
  std::uint8_t device_port = 0;
  // RDMA: the path's service level (ah_attr.sl); empty: the route's own.
  std::optional<std::uint8_t> service_level;
  RdmaOptions rdma;  // ring geometry (= QP depths), inline size, retry and timeouts
  TcpOptions tcp;
  // RDMA connect: a value the peer's listener routes the request on (AcceptRouter), sent
  // in the connect request's hello (docs/protocol.md, extension field `affinity`); 0:
  // none (the hello is then byte-identical to one without the field). Not part of the
  // ReuseKey. Listen and TCP: unused.
  std::uint64_t affinity = 0;
};

// The connection reuse parameters (S1.2): two structures with equal keys are
// interchangeable. Built from ConnectionParams once the route names the local device.
// Hashable (ReuseKeyHash) and comparable; every field takes part in both.
struct RMSG_EXPORT ReuseKey {
  Transport transport = Transport::rdma;
  std::string device;            // local RDMA device, as the route resolved it ("rxe0")
  std::uint8_t device_port = 0;  // local port on that device
  // Active side: the peer's address and port. Passive side: empty (a peer's source port
  // changes with every connection; the structure does not depend on who connects).
  SocketAddress peer;
  // Ring geometry; the QP depths follow from it (send queue send_block_count + 2, receive
  // queue recv_block_count, CQs the same), so equal geometry means equal QP depths.
  std::uint32_t send_block_size = 0;
  std::uint32_t send_block_count = 0;
  std::uint32_t recv_block_size = 0;
  std::uint32_t recv_block_count = 0;
  std::uint32_t inline_size = 0;    // requested
  std::int16_t service_level = -1;  // -1: the route's own
  std::uint8_t retry_count = 0;
  std::uint8_t rnr_retry_count = 0;
  std::uint8_t ack_timeout = 0;
  std::uint32_t resolve_timeout_ms = 0;
  std::uint32_t connect_timeout_ms = 0;

  // The key of `params` on `device`/`port`; `passive` leaves the peer out.
  static ReuseKey from(const ConnectionParams& params, std::string_view device, std::uint8_t port,
                       bool passive);
  std::string to_string() const;
  friend bool operator==(const ReuseKey&, const ReuseKey&) = default;
};

struct RMSG_EXPORT ReuseKeyHash {
  std::size_t operator()(const ReuseKey& key) const noexcept;
};

// A step deadline that passed, by step (S1.4). Each compares equal to std::errc::timed_out
// as an error condition. And the manager's own connection limit. Every code is retryable
// (rmsg::is_retryable): a later connect may succeed. rmsg::error_kind: the timeouts
// timeout, connection_limit overloaded.
enum class ConnectErrc {
  address_timeout = 1,    // address resolution did not finish in resolve_timeout
  route_timeout = 2,      // route resolution did not finish in resolve_timeout
  handshake_timeout = 3,  // connect sent, not established within connect_timeout
  // The manager holds max_connections live connections already (not a timeout: it is
  // equivalent to std::errc::resource_unavailable_try_again; retry once one is released).
  connection_limit = 4,
};
RMSG_EXPORT const std::error_category& connect_category() noexcept;
inline std::error_code make_error_code(ConnectErrc e) noexcept {
  return {static_cast<int>(e), connect_category()};
}

// How one connect went (for tools and tests; the counters hold the aggregates).
struct RMSG_EXPORT ConnectReport {
  Transport transport = Transport::rdma;
  bool reused = false;    // the structure came from the idle pool
  int reject_status = 0;  // REJECTED: the CM's status (8: nothing listens); else 0
  // Phases: resolve = address + route resolution; resources = taking or building the
  // structure; handshake = QP transitions, connect request to established. TCP: the whole
  // connect is handshake.
  Duration resolve{};
  Duration resources{};
  Duration handshake{};
  Duration total{};
};

struct RMSG_EXPORT ConnectionManagerOptions {
  std::size_t max_idle = 32;                          // idle structures kept, all keys together
  Duration max_idle_time = std::chrono::seconds(30);  // idle longer: destroyed by the tick
  // The periodic tick: step deadlines, recycling deadlines and idle expiry. It runs only
  // while there is something to watch.
  Duration tick = std::chrono::milliseconds(10);
  // Park a recycled structure only once its old id reported TIMEWAIT_EXIT (~2 s on rxe),
  // so no packet of the old connection can reach its next use. false: park it as soon as
  // it is back in RESET (docs/connection-manager.md: what rxe does either way).
  bool wait_timewait = true;
  // The longest a structure waits for TIMEWAIT_EXIT once back in RESET; past it, it is
  // parked anyway (the IB timewait the event marks, ~2.2 s on rxe, has passed) and
  // structures.timewait_missing counts it.
  Duration timewait_limit = std::chrono::seconds(4);
  // Reaping (ERR to RESET) that takes longer destroys the structure.
  Duration recycle_timeout = std::chrono::seconds(10);
  // Background work on the loop (docs/connection-manager.md, "Background work"): a verbs
  // call is a system call, a millisecond or more on a slow host (rxe under emulation), and
  // taking a structure apart or building one is a dozen of them; done in one callback they
  // hold the loop for all of that, right when a failed connection's replacement is being
  // set up. With these, that work is queued and done one verbs call per loop iteration
  // while no connect of this manager is under way (counted when queued).
  // deferred_teardown: a structure that cannot be reused (its QP failed) is taken apart
  // so, its old rdma_cm id retired the same way, instead of at once.
  bool deferred_teardown = false;
  // spares: after a connection ended by an error (its QP failed, or the peer disconnected
  // without a close), a spare structure is built so under its key, unless one is idle:
  // the reconnect (or a failover's probe) that is likely to follow takes it from the pool
  // (structures.reused) instead of building one in its own setup. It is an idle structure
  // like any other (max_idle, max_idle_time); structures.spares counts them.
  bool spares = false;
  // The most connections (both transports together) this manager keeps live at once:
  // connecting, established or lingering (see the top of this file). 0: no bound. A
  // daemon facing a connect flood sets it to what its memory, QPs and fds allow.
  std::size_t max_connections = 0;
  // The most structures being recycled at once (reaped, waiting for TIMEWAIT_EXIT, or
  // queued for it): each holds its QP, CQs and registered rings for seconds. A structure
  // released beyond it is destroyed instead of recycled (structures.recycle_full). 0: no
  // bound.
  std::size_t max_recycling = 256;
};

class ConnectionManager;
namespace cm {
class TargetState;       // internal (src/cm/accept_target.h)
struct TargetAccess;     // how src/cm makes and opens an AcceptTarget
class TcpTarget;         // internal (src/cm/tcp_target.h)
struct TcpTargetAccess;  // the same for TCP
}  // namespace cm

// A handle to a manager that accepts RDMA connect requests, or accepted TCP connections,
// routed to it by another manager's listener (ConnectionManager::accept_routed makes it). Copyable,
// and any thread may hold, copy and destroy one; it may outlive its manager, and a request routed
// to it then is rejected. Empty (default-constructed): routes to no other manager.
class RMSG_EXPORT AcceptTarget {
 public:
  AcceptTarget() = default;
  explicit operator bool() const noexcept { return state_ != nullptr || tcp_ != nullptr; }
  friend bool operator==(const AcceptTarget&, const AcceptTarget&) = default;

 private:
  friend struct cm::TargetAccess;
  friend struct cm::TcpTargetAccess;
  explicit AcceptTarget(std::shared_ptr<cm::TargetState> state) : state_(std::move(state)) {}
  explicit AcceptTarget(std::shared_ptr<cm::TcpTarget> tcp) : tcp_(std::move(tcp)) {}
  std::shared_ptr<cm::TargetState> state_;  // RDMA
  std::shared_ptr<cm::TcpTarget> tcp_;      // TCP
};

// Called on the listener's loop thread for each connect request, with the affinity its
// hello carries (0: none), or for each accepted TCP connection, with the affinity its
// first bytes carry (AffinityReader). Returns the manager that must accept it: an empty
// target, or the listener's own manager's, for the listener's manager itself. Must not
// block.
using AcceptRouter = std::function<AcceptTarget(std::uint64_t affinity)>;

// What an AffinityReader makes of the bytes a TCP connector sent so far. A TCP connect
// carries no affinity of its own: the application's first bytes do (a messenger's
// banner and hello name its node).
struct RMSG_EXPORT AffinityRead {
  enum class Verdict : std::uint8_t {
    need_more,  // wait until `need` bytes (counted from the first) are in
    route,      // route by `affinity` (0: none; the listener's own manager accepts it)
    reject,     // not a connection this listener takes: it is closed
  };
  Verdict verdict = Verdict::need_more;
  std::size_t need = 0;
  std::uint64_t affinity = 0;
};
// Called on the listener's loop thread with every byte a connection sent so far, from the
// first (first with none: its `need` is the first amount waited for). Pure; must not block.
using AffinityReader = std::function<AffinityRead(std::span<const std::byte> prefix)>;

// How a listener routes what it accepts (ConnectionManager::listen, Routing above).
struct RMSG_EXPORT AcceptRouting {
  AcceptRouter router;
  // TCP: reads each connection's affinity from its first bytes; without it a TCP listener
  // accepts every connection itself. RDMA: unused (the connect request carries it).
  AffinityReader read_affinity;
  // TCP: the most bytes read_affinity may ask for (asking more rejects the connection);
  // how long a connection may take to send what it asks; how many may wait at once (one
  // more closes the one that has waited longest).
  std::size_t max_prefix = 1024;
  Duration timeout = std::chrono::seconds(5);
  std::size_t max_waiting = 256;
  // TCP: where the outcomes are counted, as <counter_prefix><outcome> (see listen). null:
  // the manager's counters(). A set given must outlive the listener.
  CounterSet* counters = nullptr;
  std::string counter_prefix = "routing.tcp.";
};

class RMSG_EXPORT ConnectionManager {
 public:
  using ReportCallback = std::function<void(Result<Stream>, const ConnectReport&)>;

  // Errors: those of creating a timer on the loop (none today); RDMA is set up lazily.
  static Result<std::unique_ptr<ConnectionManager>> create(
      EventLoop& loop, const ConnectionManagerOptions& options = {});
  ConnectionManager(const ConnectionManager&) = delete;
  ConnectionManager& operator=(const ConnectionManager&) = delete;
  ConnectionManager(ConnectionManager&&) = delete;
  ConnectionManager& operator=(ConnectionManager&&) = delete;
  ~ConnectionManager();

  // Returns at once; `done` runs exactly once, on the loop thread, never inside this
  // call, with a connected Stream or an error (see above).
  void connect(const ConnectionParams& params, ConnectCallback done);
  void connect(const ConnectionParams& params, ReportCallback done);

  // Listens on `address` (port 0: any) with `params`' transport and options. RDMA:
  // accepted streams take structures from the pool too, keyed by the local device and
  // the listener's geometry. Errors: as rdma_listen / tcp_listen.
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept);
  // As above, and (RDMA) every connect request is first routed: `router` names the
  // manager that accepts it (see the top of this file); requests it keeps go to
  // `on_accept`. Counters: routing.handed_off (requests moved to another manager),
  // routing.target_gone, routing.migrate_failed (each also rejects). TCP: `router` is
  // not used (listen with an AcceptRouting for that).
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept, AcceptRouter router);
  // As above with routing.router, and over TCP with routing.read_affinity: every accepted
  // connection (counted against max_connections from its accept) waits on this loop,
  // unread, until read_affinity answers for its first bytes, then goes, unread and with
  // its lease, to the manager routing.router names (accept_routed: it becomes a Stream on
  // that manager's loop) or to `on_accept`. Closed instead, and counted as
  // <counter_prefix>malformed (rejected), closed (ended first), timeout (no answer within
  // routing.timeout), evicted (the oldest of routing.max_waiting when one more comes) or
  // target_gone (routed to a manager that went); <counter_prefix>routed counts the others.
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept, AcceptRouting routing);

  // Makes this manager a target for other managers' routers: connect requests routed to
  // the returned handle are accepted on this loop, with `params`' RDMA options and this
  // manager's pool (keyed as a listener's), within max_connections, and the established
  // streams delivered to `on_accept` on this loop. Calling it again replaces `params` and
  // `on_accept` (the same handle comes back). The registration ends with the manager.
  // Counters: routing.adopted (requests taken over), limit.accepts_rejected (over the
  // limit). Errors: Errc::invalid_argument (bad geometry), those of setting up RDMA
  // (Errc::not_supported in a build without it).
  // TCP params: accepted TCP connections routed to the handle become Streams on this loop
  // (with `params.tcp`), delivered to `on_accept`; each keeps the lease of the manager that
  // accepted it (routing.adopted counts them). Any thread may make this call for TCP.
  Result<AcceptTarget> accept_routed(const ConnectionParams& params, AcceptCallback on_accept);

  // Counters (docs/connection-manager.md lists them): structures.created / reused /
  // destroyed / evicted / expired / recycled / spares / deferred_teardowns / ...,
  // connects.ok, connects.failed.<cause>,
  // latency sums per mode and phase, limit.connects_refused / limit.accepts_rejected.
  const CounterSet& counters() const;
  std::size_t idle() const;       // structures parked in the pool
  std::size_t recycling() const;  // structures being reaped or waiting for TIMEWAIT_EXIT
  std::size_t pending() const;    // connects not yet delivered
  // Connections counted against max_connections now (pending connects included).
  std::size_t connections() const;
  // Destroys every idle structure now.
  void drop_idle();
  EventLoop& loop() const;

  class RMSG_HIDDEN Impl;

 private:
  explicit ConnectionManager(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace rmsg

template <>
struct std::is_error_code_enum<rmsg::ConnectErrc> : std::true_type {};
