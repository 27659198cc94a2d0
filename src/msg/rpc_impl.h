// RpcEndpoint's insides on one loop (a shard; RpcEndpoint::Front, rpc_front.h, holds one
// per loop of the messenger): the client's outstanding calls (rpc_client.cc), the server's
// handlers, pending responders and dedupe table (rpc_server.cc), message demultiplexing
// and session events (rpc.cc), what other threads hand over (rpc_afar.cc). A shard serves
// the peers its loop owns (Messenger::loop_of): their calls, requests and counters.
//
// Lifetime: the Front holds the shards; the messenger's callbacks, timers, posted tasks
// and responders hold weak_ptrs, so nothing runs on a destroyed shard, and close() (on the
// shard's loop, before the Front lets go) leaves it inert: messages, events and answers
// that still reach it are dropped. A closed shard may be destroyed on any thread.
//
// Threading: the shard's loop thread, but for what is marked any-thread (the atomics,
// call_afar, take_slot, answer, and the constants).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>

#include "msg/rpc_deadlines.h"
#include "msg/rpc_dedupe.h"
#include "msg/rpc_wire.h"
#include "msg/seams.h"
#include "rmsg/rpc.h"

namespace rmsg {

struct RpcResponder::State {
  std::weak_ptr<RpcEndpoint::Impl> endpoint;
  NodeId peer = 0;
  CallId id = 0;
  bool dedupe = false;
  // Set on the loop (a cancel message, a reset), read by cancelled() on any thread.
  std::atomic<bool> cancelled{false};
};

class RpcEndpoint::Impl : public std::enable_shared_from_this<RpcEndpoint::Impl> {
 public:
  struct Call {
    NodeId peer = 0;
    Messenger::Ticket ticket;
    Clock::time_point start{};
    Clock::time_point deadline{};
    CallCallback done;
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
    std::size_t pending = 0;  // requests from the peer whose responder is pending
    bool paused = false;      // its connection is not read (max_pending_requests)
  };
  struct Method {
    Handler handler;
    MethodOptions options;
  };

  // What the shards of one endpoint share (any thread): the counters (per-peer ones are
  // written by the peer's shard only; the endpoint-wide ones with atomic adds) and the
  // count against max_outstanding.
  struct Shared {
    CounterSet counters;
    std::atomic<std::size_t> outstanding{0};
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
  bool closed() const noexcept { return messenger_ == nullptr; }
  bool mine(CallId id) const noexcept { return id != 0 && (id - 1) % id_stride_ == id_index_; }
  void on_message(NodeId from, std::span<const std::byte> payload);
  void on_event(SessionEvent event);
  void drop_pending(NodeId peer);
  // A pending request of `peer` began (+1) or ended (-1): pauses or resumes reading it.
  void count_pending(NodeId peer, int delta);
  PeerCounters& peer_counters(NodeId node);
  std::optional<RpcPeerStats> peer_stats(NodeId node) const;

  // rpc_client.cc
  Result<CallId> call(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                      const CallOptions& options, CallCallback done);
  // rpc_afar.cc: call() from a thread other than the loop's (notify() needs no other path).
  Result<CallId> call_afar(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                           const CallOptions& options, CallCallback done);
  // A retry_of call from another thread: checked here as far as this thread can, the rest
  // (the id not outstanding, the bounds) on the loop, whose errors complete `done`.
  Result<CallId> retry_afar(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                            const CallOptions& options, CallCallback done);
  // A responder's answer (any thread): finished now on the loop, else posted to it.
  void answer(std::shared_ptr<RpcResponder::State> state, msg::RpcStatus status, std::uint32_t code,
              std::span<const std::byte> body);
  // cancel() from another thread: posted; true when `id` was given out by this shard.
  bool cancel_afar(CallId id);
  // On the loop: a call made elsewhere, its request queued (`ticket`), becomes outstanding.
  void adopt(CallId id, NodeId peer, Messenger::Ticket ticket, Clock::time_point start,
             Clock::time_point deadline, CallCallback done);
  // Takes a slot of max_outstanding (any thread); false when none is left.
  bool take_slot() noexcept;
  bool cancel(CallId id);
  Result<void> notify(NodeId peer, std::uint32_t method, std::span<const std::byte> body);
  void on_reply(NodeId from, const msg::RpcHeader& h, std::span<const std::byte> body);
  void on_deadline(CallId id);
  void arm_deadline_timer();  // at the earliest deadline queued, if earlier than armed
  void deadlines_due();
  void complete(CallId id, RpcResponse response);
  void fail_calls(NodeId peer, std::error_code why);  // peer 0: every call
  void shutdown();
  // rpc_drain.cc: the graceful shutdown.
  void drain(Clock::time_point deadline, std::function<void()> done);
  void check_drained();  // after a call completed or a responder answered
  void finish_drain();
  void defer_done(std::function<void()> done);  // on a later turn, unless closed by then

  // The messenger lane of an RPC message of `size` bytes: priority when it fits in one
  // chunk (small calls, replies and cancels pass large messages), else bulk.
  Messenger::SendOptions lane_for(std::size_t size) const noexcept {
    const std::size_t f = options_.messenger.fragment_size;
    return {.lane = f != 0 && size <= f ? Messenger::Lane::priority : Messenger::Lane::bulk,
            .service = service_};
  }

  // rpc_server.cc
  void on_request(NodeId from, const msg::RpcHeader& h, std::span<const std::byte> body);
  void on_cancel(NodeId from, CallId id);
  void on_oneway(NodeId from, const msg::RpcHeader& h, std::span<const std::byte> body);
  void finish(RpcResponder::State& state, msg::RpcStatus status, std::uint32_t code,
              std::span<const std::byte> body);
  void send_reply(NodeId to, CallId id, msg::RpcStatus status, std::uint32_t code,
                  std::span<const std::byte> body, bool dedupe);

  EventLoop& loop_;
  RpcOptions options_;
  Messenger::EventCallback on_event_;
  Messenger* messenger_ = nullptr;  // the Front's (owned or the application's); null: closed
  Messenger::Front* messenger_front_ = nullptr;  // constant after start() (any thread)
  ServiceId service_ = 0;
  std::shared_ptr<Shared> shared_;
  CounterSet& counters_;  // shared_'s
  const CallId id_index_;
  const CallId id_stride_;
  std::unordered_map<CallId, Call> calls_;
  msg::DeadlineQueue deadlines_;  // one timer for every call's deadline
  TimerId deadline_timer_ = 0;
  Clock::time_point deadline_armed_ = Clock::time_point::max();
  // Any thread: ids, the outstanding calls of the endpoint (every shard's calls_ and those
  // on their way to them: shared_'s), shut_.
  std::atomic<CallId> next_id_;
  std::atomic<std::size_t>& outstanding_;
  std::unordered_map<std::uint32_t, Method> methods_;
  std::unordered_map<std::uint32_t, OnewayHandler> oneway_;
  std::map<msg::DedupeTable::Key, std::weak_ptr<RpcResponder::State>> pending_;
  msg::DedupeTable dedupe_;
  std::unordered_map<NodeId, PeerCounters> peers_;
  std::atomic<bool> shut_{false};
  bool calls_failed_ = false;  // every call failed for good (shutdown, a drain's end, close)
  bool draining_ = false;
  bool drain_check_queued_ = false;
  TimerId drain_timer_ = 0;
  std::function<void()> drain_done_;
};

}  // namespace rmsg
