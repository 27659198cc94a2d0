// Messenger::Front: what the public Messenger holds. The shards (one Messenger::Impl per
// loop, each with its ServiceTable), the admission budgets they share, and the handoff of
// calls from other threads to the loop that owns a peer (docs/messenger.md, Threading).
//
// Threading: the shard vector is fixed at creation, so any thread may read it. A shard's
// Impl and ServiceTable are touched only on its loop's thread: run_on() calls directly when
// the caller is on it, else posts (EventLoop::post, in order per posting thread).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "msg/messenger_impl.h"
#include "msg/services.h"
#include "msg/vocabulary.h"
#include "rmsg/messenger.h"
#include "session/admission.h"

namespace rmsg {

class Messenger::Front {
 public:
  struct Shard {
    EventLoop* loop = nullptr;
    std::shared_ptr<Messenger::Impl> impl;
    std::shared_ptr<msg::ServiceTable> services;
  };
  using MakeStreams = std::function<Result<std::unique_ptr<StreamFactory>>(EventLoop&)>;

  static Result<std::unique_ptr<Front>> create(std::span<EventLoop* const> loops,
                                               const MessengerOptions& options,
                                               const MakeStreams& make_streams,
                                               DispatchCallback dispatch, EventCallback on_event);
  // The Messenger around a front, and the front inside a Messenger. Front is a member of
  // Messenger, so it reaches the private constructor and front_: the public header names
  // no internal accessor and no friend.
  static std::unique_ptr<Messenger> wrap(std::unique_ptr<Front> front) {
    return std::unique_ptr<Messenger>(new Messenger(std::move(front)));
  }
  static Front& of(Messenger& m) noexcept { return *m.front_; }
  static const Front& of(const Messenger& m) noexcept { return *m.front_; }

  explicit Front(const MessengerOptions& options);
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;
  Front(Front&&) = delete;
  Front& operator=(Front&&) = delete;
  // Shuts every shard down on its own loop (waiting for the loops that run elsewhere).
  ~Front();

  std::size_t owner(NodeId peer) const noexcept;
  Shard& shard_of(NodeId peer) noexcept { return shards_[owner(peer)]; }
  // Runs `f` on shard i's loop: now if this thread is on it, else posted (msg::run_on_loop).
  using ShardTask = std::function<void(Messenger::Impl&, msg::ServiceTable&)>;
  void run_on(std::size_t i, ShardTask f);
  // Runs `f` on shard i's loop and waits for it (the destructor's; the loop must run).
  void wait_on(std::size_t i, const std::function<void()>& f);

  Result<std::string> listen(const SocketAddress& address, const ConnectionParams& params);
  Result<void> send(NodeId peer, std::vector<std::byte> payload, ServiceId service);
  Result<void> send(NodeId peer, std::vector<std::byte> payload,
                    const Messenger::SendOptions& options);
  // send_tracked() from any thread (RPC's calls from other threads): the bounds answer now;
  // `queued` gets the ticket on the owner's loop once the message is queued (inside this
  // call when the caller is on that loop; never when the shard shut down first).
  using Queued = std::function<void(Messenger::Ticket ticket)>;
  Result<void> send_tracked(NodeId peer, std::vector<std::byte> payload,
                            const Messenger::SendOptions& options, Queued queued,
                            bool draining_ok = false);
  // Messenger::shutdown(deadline, done) over every shard (messenger_drain.cc): from now on
  // sends from any thread are refused (Errc::closed); done runs once every shard drained,
  // on the loop of the last one.
  void drain(Clock::time_point deadline, std::function<void()> done);
  // An ack on some shard made room in the total budget: the others look for sessions in a
  // refusal episode (SessionEvent::writable). Coalesced: at most one sweep in flight each.
  void total_room(std::size_t from);
  Result<void> attach(ServiceId service, DispatchCallback dispatch, EventCallback on_event);
  void detach(ServiceId service);
  // Several loops, either transport: StreamFactory::listen_routed (owner() routes by
  // affinity: an RDMA connect request's, a TCP connection's hello's node id).
  Result<std::string> listen_routed(const SocketAddress& address, const ConnectionParams& params);
  // A relayed connection (session_relay.cc) to the shard that owns `peer`, on its loop.
  void relay(NodeId peer, Stream stream, Transport transport);

  MessengerOptions options_;
  std::shared_ptr<msg::Admission> admission_;
  std::vector<Shard> shards_;
  // attach()'s users, for its synchronous answer and for a shard that gets a message for
  // one before the posted attach reached it (attached_user).
  std::optional<msg::ServiceTable::User> attached_user(ServiceId service);
  std::mutex services_mu_;
  std::map<ServiceId, msg::ServiceTable::User> attached_;
  std::atomic<bool> draining_{false};
  std::unique_ptr<std::atomic<bool>[]> sweep_pending_;  // per shard
};

}  // namespace rmsg
