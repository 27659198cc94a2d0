// RpcEndpoint::Front: what the public RpcEndpoint holds. One shard (RpcEndpoint::Impl,
// rpc_impl.h) per loop of the messenger, shard i serving the peers that loop i owns
// (Messenger::loop_of), the messenger (owned or the application's), and the routing of
// calls, cancels and messages to the shard of their peer or call id (docs/messenger.md,
// RPC over several loops).
//
// Threading: the shard vector is fixed at creation, so any thread may read it. A shard is
// touched on its loop's thread only, except for its any-thread members (rpc_impl.h):
// run_on() calls directly when the caller is on that loop, else posts.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "msg/messenger_port.h"
#include "rmsg/rpc.h"
#include "rpc/rpc_impl.h"

namespace rmsg {

class RpcEndpoint::Front {
 public:
  using MakeStreams = msg::MessengerPort::MakeStreams;

  // An endpoint that owns its messenger over `loops` (made before they run when there
  // are several). Errors: those of Messenger::create; Errc::invalid_argument.
  static Result<std::unique_ptr<Front>> create_owned(std::span<EventLoop* const> loops,
                                                     const RpcOptions& options,
                                                     const MakeStreams& make_streams,
                                                     Messenger::EventCallback on_event);
  // An endpoint as `service`'s user of the application's messenger (Messenger::attach).
  static Result<std::unique_ptr<Front>> create_attached(Messenger& messenger, ServiceId service,
                                                        const RpcOptions& options,
                                                        Messenger::EventCallback on_event);
  // The RpcEndpoint around a front, and the front inside one (as Messenger::Front::wrap/of:
  // a member of RpcEndpoint reaches its private parts without a friend in rmsg/rpc.h).
  static std::unique_ptr<RpcEndpoint> wrap(std::unique_ptr<Front> front) {
    return std::unique_ptr<RpcEndpoint>(new RpcEndpoint(std::move(front)));
  }
  static const Front& of(const RpcEndpoint& ep) noexcept { return *ep.front_; }

  Front() = default;
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;
  Front(Front&&) = delete;
  Front& operator=(Front&&) = delete;
  // Closes every shard on its own loop (waiting for the loops that run elsewhere), then
  // destroys the owned messenger or detaches from the application's.
  ~Front();

  // The shard of `peer`'s session: its loop is Messenger::loop_of(peer).
  Impl& shard_of(NodeId peer) const noexcept {
    return shards_.size() == 1 ? *shards_[0] : *shards_[port_.owner(peer)];
  }
  // The shard that gave out call id `id` (any id names one).
  Impl& shard_of_call(CallId id) const noexcept {
    return shards_.size() == 1 ? *shards_[0] : *shards_[(id - 1) % shards_.size()];
  }
  // Runs `f` on shard i's loop: now if this thread is on it, else posted.
  void run_on(std::size_t i, std::function<void(Impl&)> f);

  bool cancel(CallId id);
  void handle(std::uint32_t method, const Handler& handler, MethodOptions options);
  void handle_oneway(std::uint32_t method, const OnewayHandler& handler);
  void shutdown();
  void drain(Clock::time_point deadline, std::function<void()> done);

  std::shared_ptr<Impl::Shared> shared_ = std::make_shared<Impl::Shared>();
  std::vector<std::shared_ptr<Impl>> shards_;
  Messenger* messenger_ = nullptr;
  msg::MessengerPort port_;  // shard 0's: the routing (any thread)
  std::unique_ptr<Messenger> owned_;
  ServiceId service_ = 0;
  bool attached_ = false;

 private:
  // One shard per loop; each a copy of `on_event`.
  void make_shards(std::span<EventLoop* const> loops, const RpcOptions& options,
                   const Messenger::EventCallback& on_event);
  // The messenger's callbacks for this endpoint: with one shard straight to it, with
  // several to the shard of the message's (event's) peer.
  Messenger::DispatchCallback dispatch();
  Messenger::EventCallback events();
  // Binds the shards to the messenger (after it exists, before its loops call back).
  void bind(Messenger& messenger, ServiceId service);
  // Runs `f` on shard i's loop and waits for it (the destructor's; the loop must run).
  void wait_on(std::size_t i, const std::function<void()>& f);

  // The route table the several-shard callbacks hold (filled by bind()).
  struct Routes {
    std::vector<std::weak_ptr<Impl>> shards;
    msg::MessengerPort port;
  };
  std::shared_ptr<Routes> routes_ = std::make_shared<Routes>();
};

}  // namespace rmsg
