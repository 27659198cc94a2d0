// RpcEndpoint's insides on one loop (a shard; RpcEndpoint::Front, rpc_front.h, holds one
// per loop of the messenger): the client's outstanding calls (rpc_client.cc), the server's
// handlers, pending responders and dedupe table (rpc_server.cc), message demultiplexing
// and session events (rpc.cc), what other threads hand over (rpc_any_thread.cc). A shard
// serves the peers its loop owns (Messenger::loop_of): their calls, requests and counters.
//
// Lifetime: the Front holds the shards; the messenger's callbacks, timers, posted tasks
// and responders hold weak_ptrs (the one-loop message callback a shared_ptr: the shard then
// lives until the messenger lets go of it), so nothing runs on a destroyed shard, and
// close() (on the shard's loop, before the Front lets go) leaves it inert: messages, events
// and answers that still reach it are dropped. A closed shard may be destroyed on any
// thread.
//
// Threading: the shard's loop thread, but for what is marked any-thread (the atomics, the
// `*_any_thread` entries, take_slot, notify, answer, and the constants): `_any_thread` is
// the one suffix for an entry point another thread may call. Calls from any thread are
// routed as the messenger routes them: loop::Access::owned_here says "on the loop" (then
// the loop-thread call), else the any-thread one; the loop-thread entries assert their
// thread in Debug builds (RMSG_ASSERT_LOOP_THREAD).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loop/loop_thread.h"
#include "msg/drainer.h"
#include "msg/messenger_port.h"
#include "rmsg/rpc.h"
#include "rpc/rpc_call_states.h"
#include "rpc/rpc_deadlines.h"
#include "rpc/rpc_dedupe.h"
#include "rpc/vocabulary.h"
#include "session/payload_pool.h"
#include "wire/rpc_wire.h"

namespace rmsg {

struct RpcResponder::State {
  std::weak_ptr<RpcEndpoint::Impl> endpoint;
  NodeId peer = 0;
  CallId id = 0;
  bool dedupe = false;
  std::uint64_t session = 0;  // dedupe: the session the request came in (its reply's)
  std::uint32_t method = 0;
  // Set on the loop (a cancel message, a reset), read by cancelled() on any thread.
  std::atomic<bool> cancelled{false};
};

class RpcEndpoint::Impl : public std::enable_shared_from_this<RpcEndpoint::Impl> {
 public:
  struct PeerCounters;
  struct Call {
    NodeId peer = 0;
    PeerCounters* counters = nullptr;  // peer's (kept while it has calls outstanding)
    Messenger::Ticket ticket;
    Clock::time_point start{};
    Clock::time_point deadline{};
    CallCallback done;
  };
  using Calls = std::unordered_map<CallId, Call>;
  // A request read while the endpoint-wide bound was reached: served when there is room.
  // Or one read while its peer's replies were held: served once they are queued.
  struct Deferred {
    NodeId from = 0;
    rpc::RpcHeader header;
    std::vector<std::byte> body;
    Clock::time_point rx{};  // when it was read (its budget counts from then)
    bool has_room = false;   // its place is taken: it runs on the next serve_backlog()
  };
  struct PeerCounters {
    Counter* calls = nullptr;
    Counter* ok = nullptr;
    Counter* failed = nullptr;
    Counter* timeouts = nullptr;
    Counter* cancelled = nullptr;
    Counter* served = nullptr;
    Counter* oneway_sent = nullptr;
    Counter* oneway_received = nullptr;
    Histogram* latency = nullptr;
    std::size_t outstanding = 0;
    std::size_t pending = 0;   // requests from the peer whose responder is pending
    std::size_t deferred = 0;  // its requests in backlog_ without room yet (they pause it)
    bool paused = false;       // its connection is not read (either bound)
    // Ids of its calls cancelled before their request arrived (rpc_cancels.cc), ascending;
    // at most options_.max_early_cancels.
    std::vector<CallId> early_cancels;
    // Its replies that found its session queue full, oldest first (rpc_replies.cc): they
    // go out before any later one, and pause reading the peer until they are queued.
    std::deque<std::vector<std::byte>> held;
    std::uint64_t held_session = 0;  // the session they are for (session_of())
    // Its requests read while replies are held, unrun (copies), oldest first; past
    // max_pending_requests of them or session_max_bytes the peer is no longer read.
    std::deque<Deferred> waiting;
    std::size_t waiting_bytes = 0;
  };
  struct Method {
    Handler handler;
    MethodOptions options;
  };
  // A request's responder while it is pending: `state` identifies it without locking
  // `weak` (make_shared: the block, and so the address, stays taken while `weak` lives).
  struct Pending {
    const RpcResponder::State* state = nullptr;
    std::weak_ptr<RpcResponder::State> weak;
  };
  using PendingMap = std::map<rpc::DedupeTable::Key, Pending>;

  // What the shards of one endpoint share (any thread): the counters (per-peer ones are
  // written by the peer's shard only; the endpoint-wide ones with atomic adds) and the
  // count against max_outstanding.
  // And the endpoint-wide bound on requests handed to handlers (rpc_backlog.cc): their
  // count, the shards with requests waiting for room, and the shards (fixed at creation).
  struct Shared {
    CounterSet counters;
    std::atomic<std::size_t> outstanding{0};
    std::atomic<std::size_t> pending_total{0};
    std::atomic<std::size_t> waiting_shards{0};
    std::atomic<std::size_t> named_peers{0};  // peers with rpc.peer.<id>.* (max_peer_counters)
    std::vector<std::weak_ptr<Impl>> shards;
  };

  // Shard `index` of `count`: its call ids are index + 1 + k * count (k = 0, 1, ...), so
  // that (id - 1) % count names the shard of any id (one shard: 1, 2, 3, ...).
  Impl(EventLoop& loop, const RpcOptions& options, Messenger::EventCallback on_event,
       std::shared_ptr<Shared> shared, std::size_t index, std::size_t count);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
  ~Impl() = default;

  // rpc.cc
  // Binds the shard to the messenger (its callbacks are the Front's to install).
  void start(Messenger& messenger, ServiceId service);
  // The endpoint goes (on the loop): fail every call, drop pending responders, let go of
  // the messenger; from then on the shard is inert.
  void close();
  bool closed() const noexcept { return port_.closed(); }
  bool mine(CallId id) const noexcept { return id != 0 && (id - 1) % id_stride_ == id_index_; }
  void on_message(NodeId from, std::span<const std::byte> payload);
  void on_event(SessionEvent event);
  void drop_pending(NodeId peer);
  // A pending request of `peer` began or ended: pauses or resumes reading it (its bound),
  // gives back its place under the endpoint-wide bound.
  void pending_began(NodeId peer, PeerCounters& pc) {
    if (++pc.pending >= pause_at_) update_pause(peer, pc);
  }
  void pending_ended(NodeId peer) {
    PeerCounters& pc = peer_counters(peer);
    --pc.pending;
    if (pc.paused) update_pause(peer, pc);
    if (bounded()) release_room();
  }
  // The peer's counters (made on first use; one-entry cache in front of the map).
  PeerCounters& peer_counters(NodeId node) {
    return node == peer_cache_id_ && peer_cache_ != nullptr ? *peer_cache_ : find_peer(node);
  }
  PeerCounters& find_peer(NodeId node);
  PeerCounters make_peer(NodeId node);
  bool take_name() noexcept;  // one of max_peer_counters (any thread)
  // A reset peer: its entry in peers_ goes, once nothing points at it.
  void forget_peer(NodeId peer);
  // handle(), handle_oneway() on this shard's loop: a handler replaced while one runs is
  // kept until the outermost returns (so a request costs no copy of its handler).
  void set_method(std::uint32_t method, Method m);
  void set_oneway(std::uint32_t method, OnewayHandler h);
  std::optional<RpcPeerStats> peer_stats(NodeId node) const;

  // rpc_client.cc
  // On the peer's loop (RpcEndpoint::call routes the others to call_any_thread()).
  Result<CallId> call(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                      const CallOptions& options, CallCallback done);
  // rpc_any_thread.cc: call() from a thread other than the loop's (notify() needs no other path).
  Result<CallId> call_any_thread(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                                 const CallOptions& options, CallCallback done);
  // A retry_of call from another thread: checked here as far as this thread can, the rest
  // (the id not outstanding, the bounds) on the loop, whose errors complete `done`.
  Result<CallId> retry_any_thread(NodeId peer, std::uint32_t method,
                                  std::span<const std::byte> body, const CallOptions& options,
                                  CallCallback done);
  // A responder's answer (any thread): finished now on the loop, else posted to it.
  void answer(std::shared_ptr<RpcResponder::State> state, rpc::RpcStatus status, std::uint32_t code,
              std::span<const std::byte> body);
  // cancel() from another thread: true when the call was outstanding and this cancel
  // claimed it (calls_states_); the rest is posted to the loop.
  bool cancel_any_thread(CallId id);
  // On the loop: withdraws the call's request, tells the server, completes it cancelled.
  void cancel_now(Calls::iterator it);
  // On the loop: a call made elsewhere, its request queued (`ticket`), becomes outstanding.
  void adopt(CallId id, NodeId peer, Messenger::Ticket ticket, Clock::time_point start,
             Clock::time_point deadline, CallCallback done);
  // Takes a slot of max_outstanding (any thread); false when none is left.
  bool take_slot() noexcept;
  // What every call() is refused for, in this order, on any thread (none: {}): the shard
  // shut down, an argument (peer, done, deadline), a body over the message size, a deadline
  // already past at `now`.
  std::error_code refuse_call(NodeId peer, std::size_t body_size, const CallOptions& options,
                              const CallCallback& done, Clock::time_point now) const;
  bool cancel(CallId id);
  // Any thread: on the loop it encodes into the shard's buffers and counts at once.
  Result<void> notify(NodeId peer, std::uint32_t method, std::span<const std::byte> body);
  void on_reply(NodeId from, const rpc::RpcHeader& h, std::span<const std::byte> body);
  void on_deadline(CallId id);
  void arm_deadline_timer();  // at the earliest deadline queued, if earlier than armed
  void deadlines_due();
  void complete(CallId id, RpcResponse response);  // latency: until now
  void complete(Calls::iterator it, RpcResponse response, Clock::time_point end);
  // calls_.emplace without an allocation when a completed call left its node behind.
  void insert_call(CallId id, Call&& c);              // moved once, into the node
  void fail_calls(NodeId peer, std::error_code why);  // peer 0: every call
  void shutdown();
  // rpc_drain.cc: the graceful shutdown.
  void drain(Clock::time_point deadline, std::function<void()> done);
  // After a call completed or a responder answered (the test whether a drain runs inline).
  void check_drained() { drainer_.check(); }
  void defer_done(std::function<void()> done);  // on a later turn, unless closed by then

  // The messenger lane of an RPC message of `size` bytes: priority when it fits in one
  // chunk (small calls, replies and cancels pass large messages), else bulk.
  Messenger::SendOptions lane_for(std::size_t size) const noexcept {
    const std::size_t f = options_.messenger.fragment_size;
    return {.lane = f != 0 && size <= f ? Messenger::Lane::priority : Messenger::Lane::bulk,
            .service = service_};
  }

  // An RPC message (header and body) in a buffer of the messenger shard's pool (the
  // loop's thread only).
  std::vector<std::byte> encode(const rpc::RpcHeader& h, std::span<const std::byte> body) {
    std::vector<std::byte> out = port_.buffers().take();
    rpc::encode_rpc_to(h, body, out);
    return out;
  }

  // rpc_server.cc
  void on_request(NodeId from, const rpc::RpcHeader& h, std::span<const std::byte> body);
  // The checks and the handler; `rx`: when it was read. `has_room`: a deferred request
  // that already took its place under max_pending_requests_total. False when no handler
  // ran (refused, answered from the dedupe table, or deferred).
  // `waited`: it was read earlier (its budget may have run out meanwhile).
  bool serve(NodeId from, PeerCounters& pc, const rpc::RpcHeader& h,
             std::span<const std::byte> body, Clock::time_point rx, bool has_room,
             bool waited = false);

  // rpc_cancels.cc: cancels that overtook their request (max_early_cancels).
  void remember_cancel(PeerCounters& pc, CallId id);
  // A request from a peer with remembered cancels: true when it is one (dropped unrun).
  bool cancelled_early(PeerCounters& pc, const rpc::RpcHeader& h, std::size_t size);

  // rpc_backlog.cc: the endpoint-wide bound (max_pending_requests_total).
  bool bounded() const noexcept { return options_.max_pending_requests_total != 0; }
  bool take_room() noexcept;  // a place for one more request in a handler (any thread)
  void release_room();        // a pending request ended: wakes whoever waits for room
  void defer(NodeId from, PeerCounters& pc, const rpc::RpcHeader& h,
             std::span<const std::byte> body, Clock::time_point rx);
  void serve_backlog();     // the deferred requests there is room for, oldest first
  void schedule_backlog();  // serve_backlog() on a later turn (once)
  // Drops the peer's deferred requests (0: every peer's); `reply`: answer each one
  // shutting_down. A cancelled one is dropped alone (drop_deferred).
  void flush_backlog(NodeId peer, bool reply);
  bool drop_deferred(NodeId from, CallId id);
  void note_backlog();  // an empty backlog no longer counts as waiting
  // Pauses or resumes reading the peer as its bounds say.
  void update_pause(NodeId peer, PeerCounters& pc);
  // pending_[key] = state, in a spare node when there is one.
  void add_pending(const rpc::DedupeTable::Key& key,
                   const std::shared_ptr<RpcResponder::State>& state);
  // A responder state for a new request: a recycled one (its endpoint already set) or a
  // new one. recycle() takes back one answered on this loop that nothing else holds.
  std::shared_ptr<RpcResponder::State> take_state();
  void recycle(std::shared_ptr<RpcResponder::State> state) noexcept;
  // Counts a handler running (handlers_running_); the outermost's end frees the retired.
  struct Running {
    explicit Running(Impl& impl) noexcept : impl_(impl) { ++impl_.handlers_running_; }
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    Running(Running&&) = delete;
    Running& operator=(Running&&) = delete;
    ~Running();
    Impl& impl_;
  };
  void on_cancel(NodeId from, CallId id);
  void on_oneway(NodeId from, const rpc::RpcHeader& h, std::span<const std::byte> body);
  void finish(RpcResponder::State& state, rpc::RpcStatus status, std::uint32_t code,
              std::span<const std::byte> body);

  // rpc_replies.cc: a reply to `to`, kept in the dedupe table when `keep` (its request's
  // responder state) is given. Never dropped while the peer's session lasts: one that
  // does not fit in the session's queue waits (held) and pauses reading the peer until
  // SessionEvent::writable lets it go; one that can never fit (over max_message_size or
  // a queue bound) is answered too_large instead.
  void send_reply(NodeId to, CallId id, rpc::RpcStatus status, std::uint32_t code,
                  std::span<const std::byte> body, const RpcResponder::State* keep);
  void queue_reply(NodeId to, std::vector<std::byte> bytes);
  // The peer's held replies, oldest first, as far as its queue takes them; then, once
  // none is left, its waiting requests.
  void flush_held(NodeId peer);
  void wait_for_replies(NodeId from, PeerCounters& pc, const rpc::RpcHeader& h,
                        std::span<const std::byte> body);
  bool replies_held() const;  // any peer's (a drain waits for them)
  // The peer's held replies and waiting requests belong to a session that went without a
  // reset event (Messenger::mark_down): dropped, not sent to its successor.
  void drop_stale_held(NodeId peer, PeerCounters& pc);
  void answer_waiting();  // every waiting request answered shutting_down (a drain)
  // The server's cookie for the session with `peer` (0: none): the incarnation a dedupe
  // entry belongs to.
  std::uint64_t session_of(NodeId peer) const;

  EventLoop& loop_;
  RpcOptions options_;
  const std::size_t pause_at_;  // max_pending_requests (0: none, so SIZE_MAX)
  Messenger::EventCallback on_event_;
  // The messenger shard of this loop (set by start(); the Front's messenger, owned or the
  // application's), which owns the sessions of every peer this shard serves: calls and
  // replies (on this loop) are queued there directly, not through the public Messenger
  // and the front's routing. Its shard part closes with close(); its any-thread part
  // (send, send_tracked, options) stays constant for calls from other threads.
  msg::MessengerPort port_;
  ServiceId service_ = 0;
  // The messenger's session_max_bytes (set by start()): the bound on a peer's requests
  // waiting behind its held replies (rpc_replies.cc).
  std::size_t wait_max_bytes_ = SIZE_MAX;
  std::shared_ptr<Shared> shared_;
  CounterSet& counters_;  // shared_'s
  const CallId id_index_;
  const CallId id_stride_;
  Calls calls_;
  rpc::CallStates call_states_;  // any thread: which of calls_ (and those on their way) are
                                 // outstanding, for cancel() from other threads
  // Nodes of completed calls (and of answered requests' pending_ entries) for the next
  // ones: a call at depth 1 allocates nothing of the endpoint's (kSpareNodes each).
  static constexpr std::size_t kSpareNodes = 64;
  std::vector<Calls::node_type> spare_calls_;
  std::vector<PendingMap::node_type> spare_pending_;
  std::vector<std::shared_ptr<RpcResponder::State>> spare_states_;  // kSpareNodes at most
  rpc::DeadlineQueue deadlines_;  // one timer for every call's deadline
  TimerId deadline_timer_ = 0;
  Clock::time_point deadline_armed_ = Clock::time_point::max();
  // Any thread: ids, the outstanding calls of the endpoint (every shard's calls_ and those
  // on their way to them: shared_'s), shut_.
  std::atomic<CallId> next_id_;
  std::atomic<std::size_t>& outstanding_;
  std::unordered_map<std::uint32_t, std::unique_ptr<const Method>> methods_;
  std::unordered_map<std::uint32_t, std::unique_ptr<const OnewayHandler>> oneway_;
  // Handlers running (a count: one may run inside another, e.g. one that drives the loop)
  // and those replaced meanwhile.
  int handlers_running_ = 0;
  std::vector<std::unique_ptr<const Method>> retired_methods_;
  std::vector<std::unique_ptr<const OnewayHandler>> retired_oneway_;
  PendingMap pending_;
  std::deque<Deferred> backlog_;  // max_pending_requests_total
  bool backlog_scheduled_ = false;
  std::atomic<bool> waiting_{false};      // counted in shared_->waiting_shards
  std::atomic<bool> wake_posted_{false};  // a serve_backlog() posted by another shard
  rpc::DedupeTable dedupe_;
  std::unordered_map<NodeId, PeerCounters> peers_;
  // Peers whose session's last connect attempt failed, no connection opened since: why.
  // A call that reaches its deadline to one completes with that instead of the timeout.
  std::unordered_map<NodeId, std::error_code> unreached_;
  NodeId peer_cache_id_ = 0;
  PeerCounters* peer_cache_ = nullptr;
  std::atomic<bool> shut_{false};
  bool calls_failed_ = false;    // every call failed for good (shutdown, a drain's end, close)
  msg::Drainer drainer_{loop_};  // drain(): waiting for calls and responders
  std::function<void()> drain_done_;
};

}  // namespace rmsg
