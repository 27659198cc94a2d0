// RPC over the Messenger: request/response calls and one-way messages between nodes.
// Design and policies: docs/messenger.md (RPC); every byte of the RPC header:
// docs/protocol.md (Messenger RPC).
//
// An RpcEndpoint owns a Messenger (messenger() gives it for listen/add_peer/session_info)
// and takes its dispatch and session events; or it is one user (a service) of a messenger
// the application owns and shares with other users, all over one session per peer. Either
// may run on one loop or on several (Threading below). Calls to one peer share that peer's
// session: many may be outstanding, replies come in any order, matched by a 64-bit call id.
//
// Deadlines are absolute in the caller's steady clock (EventLoop::now()), or a relative
// CallOptions::timeout; the request carries the remaining budget, because clocks are not
// synchronised. A call that reaches its deadline completes with RpcErrc::timeout, or, when
// the peer could not be reached (its session's last connect attempt failed and none
// succeeded since), with why: that attempt's error (Errc::connection_refused,
// Errc::unreachable, ENODEV..., rmsg::error_kind unreachable; a connect step's timeout).
// Either way it is never retried behind the caller's back: its request is withdrawn from the
// messenger's queue (Messenger::withdraw), so a replay after a reconnect does not deliver it; a
// server also refuses (status timeout) a request whose budget ran out before its handler would run.
// cancel() completes a call with RpcErrc::cancelled, withdraws its request, and sends a cancel
// message the server acts on (a pending responder sees cancelled(), and its reply is not sent; a
// request whose cancel overtook it is dropped unrun when it arrives: max_early_cancels).
//
// A session reset (the peer restarted, or forgot us) fails that peer's outstanding calls
// with RpcErrc::session_reset: whether they ran is unknown. An application that retries a
// non-idempotent call passes CallOptions::retry_of, and a server that registered the
// method with MethodOptions::dedupe answers the retry from its bounded table (the reply
// of the call with that id and method in the same session) instead of running the
// handler again. That table is in memory and per session: a retry after a timeout or a
// reconnect the session survived runs once; a retry after a session reset, or after the
// server restarted, runs the handler again (at least once). Only a request marked as a
// retry is looked up: a new call always runs, whatever an earlier caller with the same
// node id and call id left behind.
//
// Every request gets its reply or its caller an error naming why (never silence): a reply
// that does not fit in the server's session queue waits until it does, and the peer's
// later requests wait unrun behind it (backpressure); one that can never fit fails its
// call with RpcErrc::too_large. A notify() whose session resets before delivery is not
// resent: it comes back RPC-framed in the sender's SessionEvent (reset: `unsent`, or
// `unknown` when it may have been delivered) for the application to send again or drop.
//
// Threading (docs/messenger.md, RPC over several loops): the endpoint runs on the loops of
// its messenger, one shard per loop; shard i serves the peers loop i owns
// (Messenger::loop_of(peer)), so every callback about a peer runs on its session's loop:
// `done` of a call to it, the handlers of its requests, events. With several loops,
// callbacks about different peers run at the same time on different threads.
//   - call() and notify(): any thread. On the peer's loop they act at once; elsewhere
//     their checks, the call id, max_outstanding and the messenger's queue bounds answer
//     synchronously and the request is handed to the peer's loop (in order per calling
//     thread), where the call becomes outstanding. A retry_of call from another thread is
//     handed over whole: what only the loop can tell (the call it retries still
//     outstanding, max_outstanding, a queue bound, a shutdown meanwhile) completes `done`
//     with that error instead of failing call().
//   - cancel(): any thread, and exact: true iff the call was outstanding and this cancel
//     is the one that cancelled it; `done` then runs once with RpcErrc::cancelled, even
//     if a reply arrives meanwhile. On the call's loop it completes the call at once;
//     elsewhere the call is claimed at once (an atomic state per call) and completed on
//     its loop soon after. A call made on another thread is cancellable as soon as
//     call() returned; a retry_of call from another thread once it reached its loop.
//   - Responders: answered (or destroyed) on any thread; off the loop that received the
//     request, the answer is posted to it.
//   - handle(), handle_oneway(): before the loops run (any one thread), or from any
//     thread: each loop's table is updated on that loop (at once on the caller's own).
//   - shutdown(), shutdown(deadline, done): any thread; call() refuses at once, each shard
//     acts on its loop (the caller's own at once, the others posted).
//   - peer_stats(peer): loop_of(peer)'s thread (with one loop: the loop's), or before the
//     loops run. messenger(), counters(): any thread.
// Call ids: shard i of N gives out i+1, i+1+N, i+1+2N, ... (so (id - 1) mod N names the
// shard; with one loop 1, 2, 3, ...); unique and nonzero. Callbacks may call call(),
// cancel(), notify() and reply; they must not destroy the endpoint. The loops must outlive
// the endpoint (and any answer of a responder that races with its destruction), and keep
// running while calls from other threads are on their way. The destructor may run on any
// thread: it closes each shard on its own loop and waits for it, so the loops must be
// running (or not yet started, or driven by the destroying thread), as for the messenger.
// Outstanding calls complete with RpcErrc::shutting_down inside it (on their loops); a call
// still on its way to its loop then completes so or not at all; later answers of
// responders are dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <system_error>
#include <vector>

#include "rmsg/counters.h"
#include "rmsg/event_loop.h"
#include "rmsg/export.h"
#include "rmsg/messenger.h"
#include "rmsg/result.h"

namespace rmsg {

// Why a call failed. 1-5 are also reply statuses on the wire (docs/protocol.md).
// rmsg::is_retryable: true for timeout and session_reset (a retry may run the handler
// again: CallOptions::retry_of, above), false for the others. rmsg::error_kind:
// handler_error is application, unknown_method and too_large rejected, the rest their names.
enum class RpcErrc {
  handler_error = 1,   // the handler answered with an error (RpcResponse::app_code)
  unknown_method = 2,  // the server has no handler for the method
  too_large = 3,       // the request exceeds the server's max_request_size (or ours), or the
                       // reply can never fit the server's session queue
  shutting_down = 4,   // the server (or this endpoint) is shutting down
  timeout = 5,         // the deadline passed (here, or before the server's dispatch)
  cancelled = 6,       // cancel() (local only)
  session_reset = 7,   // the session with the peer was reset: the call may or may not have run
};
RMSG_EXPORT const std::error_category& rpc_category() noexcept;
inline std::error_code make_error_code(RpcErrc e) noexcept {
  return {static_cast<int>(e), rpc_category()};
}

using CallId = std::uint64_t;  // 0: none

// The completion of a call.
struct RMSG_EXPORT RpcResponse {
  CallId id = 0;                // the call this completes (what call() returned)
  std::error_code error;        // empty: ok
  std::uint32_t app_code = 0;   // handler_error: the handler's code
  std::vector<std::byte> body;  // ok, handler_error: the reply body
  Duration latency{};           // from call() to completion (a reply: to when it was read)
};

struct RMSG_EXPORT CallOptions {
  // When the call gives up: exactly one of the two (a zero value is unset). `deadline` is
  // absolute, in EventLoop::now()'s clock; `timeout` counts from call(), on the clock of
  // the peer's loop (Messenger::loop_of(peer), whose clock the call's deadline is kept on).
  Clock::time_point deadline{};
  // Reuse this (finished) call's id: a retry, answered from the server's dedupe table when
  // the call's reply is there (same method, same session); else the handler runs.
  CallId retry_of = 0;
  Duration timeout{};  // (after retry_of: positional {deadline, retry_of} stays valid)
};

struct RMSG_EXPORT MethodOptions {
  // Keep the reply in the dedupe table, so that a retry (CallOptions::retry_of) of the
  // same call in the same session is answered from it and the handler does not run twice
  // (non-idempotent operations). Not across a session reset or a server restart: the
  // table is in memory (at least once there; see the top of this file).
  bool dedupe = false;
};

struct RMSG_EXPORT RpcOptions {
  MessengerOptions messenger;  // node_id required (see Messenger)
  // Request bodies above this are refused by the server (status too_large) unread.
  std::size_t max_request_size = std::size_t{4} << 20;
  // Calls outstanding on this endpoint at once (all its loops together); call() refuses
  // beyond (Errc::resource_exhausted). Each loop keeps one 8-byte call state per slot for
  // cancel() from other threads: this many rounded up to a power of two, 64 to 16,384
  // (128 KiB at the default).
  std::size_t max_outstanding = 65536;
  // Replies kept for MethodOptions::dedupe methods (all peers of a loop together, oldest
  // evicted first: each loop's shard keeps this many for the peers it owns). 0: no table
  // (dedupe methods run every time).
  std::size_t dedupe_entries = 4096;
  // Flow control: requests from one peer whose responder is still pending, at which the
  // endpoint stops reading that peer's connection (its further requests wait in its own
  // queue and the stream: backpressure, nothing dropped) until one is answered. 0: no bound.
  std::size_t max_pending_requests = 1024;
  // The same bound over every peer and loop of the endpoint together: at most this many
  // requests are in handlers (responder pending) at once. A request read past it waits
  // (copied, at most about one per peer) and its peer's connection is no longer read
  // until there is room; handlers' answers make room, oldest waiting request first (a
  // loop serves its own waiting requests before waking others). Nothing is dropped; the
  // callers see backpressure only. 0: no bound.
  std::size_t max_pending_requests_total = 0;
  // Cancels remembered per peer for requests not seen yet (a cancel takes the priority
  // lane and can overtake its large request): such a request is dropped when it arrives,
  // unrun and unanswered (its call completed with RpcErrc::cancelled already). Past the
  // bound the oldest (lowest id) is forgotten, and its request, should it still come, runs
  // (its reply is dropped by the caller). 0: none remembered.
  std::size_t max_early_cancels = 64;
  // Peers that get counters of their own (rpc.peer.<id>.*, kept for the endpoint's life);
  // the counters of peers past this many, in the order first seen, are summed in
  // rpc.peer.other.* (rpc.peer.other.<loop>.* with several loops), which peer_stats()
  // then reports for them. The rest of a peer's state goes with its session (a reset).
  std::size_t max_peer_counters = 1024;
};

// What a handler gets. `body` is valid only during the handler call; copy what outlives it.
struct RMSG_EXPORT RpcRequest {
  NodeId from = 0;
  CallId id = 0;
  std::uint32_t method = 0;
  std::span<const std::byte> body;
  // The caller's budget, in this loop's clock, counted from when the request was read
  // (time_point::max(): none given).
  Clock::time_point deadline = Clock::time_point::max();
};

// A handler's one way to answer; move-only. Reply once (ok or error); a responder
// destroyed without a reply answers handler_error with app_code 0, so no call hangs on a
// forgotten reply. Replies after a cancel, or after the endpoint is gone, are dropped. Any
// thread (one at a time per responder): off the request's loop the reply is posted to it.
class RMSG_EXPORT RpcResponder {
 public:
  struct RMSG_HIDDEN State;
  RpcResponder() = default;
  explicit RpcResponder(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
  RpcResponder(RpcResponder&&) noexcept = default;
  RpcResponder& operator=(RpcResponder&& other) noexcept;
  RpcResponder(const RpcResponder&) = delete;
  RpcResponder& operator=(const RpcResponder&) = delete;
  ~RpcResponder();

  void ok(std::span<const std::byte> body = {});
  void error(std::uint32_t app_code, std::span<const std::byte> body = {});
  // The caller cancelled the call (its reply would be dropped).
  bool cancelled() const noexcept;
  bool pending() const noexcept { return state_ != nullptr; }

 private:
  std::shared_ptr<State> state_;
};

struct RMSG_EXPORT RpcPeerStats {
  std::uint64_t calls = 0;      // call() accepted
  std::uint64_t ok = 0;         // completed ok
  std::uint64_t failed = 0;     // completed with an error (timeouts etc. included)
  std::uint64_t timeouts = 0;   // completed with RpcErrc::timeout
  std::uint64_t cancelled = 0;  // completed with RpcErrc::cancelled
  std::uint64_t served = 0;     // requests from the peer answered by a handler
  std::uint64_t oneway_sent = 0;
  std::uint64_t oneway_received = 0;
  std::size_t outstanding = 0;         // calls to the peer not yet complete
  const Histogram* latency = nullptr;  // call latency (ns) of completed calls
};

class RMSG_EXPORT RpcEndpoint {
 public:
  using Handler = std::function<void(const RpcRequest& request, RpcResponder reply)>;
  using OnewayHandler = std::function<void(const RpcRequest& request)>;
  using CallCallback = std::function<void(RpcResponse response)>;

  // Errors: those of Messenger::create; Errc::invalid_argument (max_outstanding 0).
  static Result<std::unique_ptr<RpcEndpoint>> create(EventLoop& loop, const RpcOptions& options,
                                                     Messenger::EventCallback on_event = {});
  // Over its own messenger on several loops (Messenger::create over loops: made before
  // they run). Errors: as above, and Errc::invalid_argument for no loops or a null one.
  static Result<std::unique_ptr<RpcEndpoint>> create(std::span<EventLoop* const> loops,
                                                     const RpcOptions& options,
                                                     Messenger::EventCallback on_event = {});
  // An endpoint over `messenger` as its user `service` (Messenger::attach; not 0): it sends
  // and receives only that service's messages, sees every session event, and detaches when
  // destroyed. The messenger (over one loop or several) must outlive it; options.messenger
  // is ignored (the messenger's own are used). Errors: those of attach();
  // Errc::invalid_argument.
  static Result<std::unique_ptr<RpcEndpoint>> create(Messenger& messenger, ServiceId service,
                                                     const RpcOptions& options,
                                                     Messenger::EventCallback on_event = {});
  RpcEndpoint(const RpcEndpoint&) = delete;
  RpcEndpoint& operator=(const RpcEndpoint&) = delete;
  RpcEndpoint(RpcEndpoint&&) = delete;
  RpcEndpoint& operator=(RpcEndpoint&&) = delete;
  ~RpcEndpoint();

  Messenger& messenger() noexcept;

  // Registers (or replaces) the handler of `method` on every loop (Threading: at once on
  // the caller's loop, or everywhere before the loops run; posted to the others).
  void handle(std::uint32_t method, Handler handler, MethodOptions options = {});
  void handle_oneway(std::uint32_t method, OnewayHandler handler);

  // Starts a call; `done` runs exactly once, on the peer's loop, never inside call(). A
  // retry_of id must be one of a call to the same peer. Errors (nothing started, `done`
  // not run): RpcErrc::timeout (deadline not in the future, timeout below zero),
  // RpcErrc::too_large (body over the messenger's max_message_size less the header),
  // RpcErrc::shutting_down, Errc::invalid_argument (bad peer, neither or both of deadline
  // and timeout, a retry_of id of another loop's peer, or, on the peer's loop, still
  // outstanding), Errc::resource_exhausted (max_outstanding or a messenger queue bound;
  // for a retry_of call from another thread these come through `done`: Threading).
  Result<CallId> call(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                      const CallOptions& options, CallCallback done);
  // The same with CallOptions{.timeout = timeout} (a zero timeout is none: invalid_argument).
  Result<CallId> call(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                      Duration timeout, CallCallback done);
  // Completes the call with RpcErrc::cancelled and tells the server. False when the call
  // is not outstanding (or another cancel got it first). On the call's loop `done` runs
  // inside cancel(); from another thread on that loop soon after (Threading).
  bool cancel(CallId id);
  // A one-way message: no id, no reply, delivered once and in order with the calls of its
  // size class (messages up to fragment_size take the priority lane and may overtake
  // larger ones: docs/messenger.md, Flow control). Within the session: one the session's
  // reset caught comes back in the reset event (top of this file).
  Result<void> notify(NodeId peer, std::uint32_t method, std::span<const std::byte> body);

  // New requests are answered shutting_down; outstanding calls complete with
  // RpcErrc::shutting_down now (on the caller's loop; on the others when the shutdown
  // reaches them); the messenger stays (replies still go out).
  void shutdown();

  // ---- Flow control (docs/messenger.md, Flow control) ----
  // Graceful shutdown: call() and notify() refuse (RpcErrc::shutting_down) and requests
  // that arrive are answered shutting_down; outstanding calls and pending responders get
  // until `deadline` to complete. Then the calls still outstanding complete with
  // RpcErrc::shutting_down and the messenger drains its queues (replies included) until
  // `deadline` (Messenger::shutdown(deadline, done); one shared with other users is
  // theirs to shut down); `done` runs once after that, on one of the loops (the last to
  // finish), never inside this call. Each loop's shard drains on its loop. Destroying the
  // endpoint during it does not run `done`.
  void shutdown(Clock::time_point deadline, std::function<void()> done);
  // ---- end of Flow control ----

  // From the peer's shard (loop_of(peer)'s thread; see Threading).
  std::optional<RpcPeerStats> peer_stats(NodeId peer) const;
  // rpc.* counters and per peer rpc.peer.<id>.* counters and the rpc.peer.<id>.call_ns
  // histogram (docs/messenger.md lists them): one set for the endpoint, whatever its
  // loops (a peer's are written by its loop only). Any thread (values as CounterSet says).
  const CounterSet& counters() const noexcept;

  class RMSG_HIDDEN Impl;   // one loop's calls, handlers and counters (a shard)
  class RMSG_HIDDEN Front;  // the shards and the routing to them

 private:
  explicit RpcEndpoint(std::unique_ptr<Front> front);
  std::unique_ptr<Front> front_;
};

}  // namespace rmsg

template <>
struct std::is_error_code_enum<rmsg::RpcErrc> : std::true_type {};
