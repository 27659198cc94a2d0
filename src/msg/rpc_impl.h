// RpcEndpoint's insides: the client's outstanding calls (rpc_client.cc), the server's
// handlers, pending responders and dedupe table (rpc_server.cc), message demultiplexing
// and session events (rpc.cc).
//
// Lifetime: the Impl is shared (RpcEndpoint holds it); the messenger's callbacks, timers
// and responders hold weak_ptrs, so nothing runs on a destroyed endpoint.
//
// Threading: the loop thread.
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
  bool cancelled = false;
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

  Impl(EventLoop& loop, const RpcOptions& options, Messenger::EventCallback on_event);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
  ~Impl() = default;

  // rpc.cc
  Result<void> start(std::unique_ptr<StreamFactory> streams);
  // Over a messenger the application owns, as `service`'s user (Messenger::attach).
  Result<void> start(Messenger& messenger, ServiceId service);
  void close();  // the endpoint goes: fail every call, drop the messenger
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
  Messenger* messenger_ = nullptr;    // owned_ or the application's
  std::unique_ptr<Messenger> owned_;  // RpcEndpoint::create(loop, ...)'s own
  ServiceId service_ = 0;
  CounterSet counters_;
  std::unordered_map<CallId, Call> calls_;
  msg::DeadlineQueue deadlines_;  // one timer for every call's deadline
  TimerId deadline_timer_ = 0;
  Clock::time_point deadline_armed_ = Clock::time_point::max();
  // Any thread: ids, the outstanding calls (calls_ and those on their way to it), shut_.
  std::atomic<CallId> next_id_{1};
  std::atomic<std::size_t> outstanding_{0};
  std::unordered_map<std::uint32_t, Method> methods_;
  std::unordered_map<std::uint32_t, OnewayHandler> oneway_;
  std::map<msg::DedupeTable::Key, std::weak_ptr<RpcResponder::State>> pending_;
  msg::DedupeTable dedupe_;
  std::unordered_map<NodeId, PeerCounters> peers_;
  std::atomic<bool> shut_{false};
  bool draining_ = false;
  bool drain_check_queued_ = false;
  Clock::time_point drain_deadline_{};
  TimerId drain_timer_ = 0;
  std::function<void()> drain_done_;
};

}  // namespace rmsg
