// The messenger's internal seam: where its Streams come from. The public Messenger uses
// the ConnectionManager (TCP and RDMA); tests plug in the loopback stream with its fault
// injector, or wrap real streams so that they can kill them under a session. Not
// installed.
//
// Threading: the messenger's loop thread.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "rmsg/connection_manager.h"
#include "rmsg/counters.h"
#include "rmsg/messenger.h"
#include "rmsg/stream.h"

namespace rmsg {

class StreamFactory {
 public:
  StreamFactory() = default;
  StreamFactory(const StreamFactory&) = delete;
  StreamFactory& operator=(const StreamFactory&) = delete;
  StreamFactory(StreamFactory&&) = delete;
  StreamFactory& operator=(StreamFactory&&) = delete;
  virtual ~StreamFactory() = default;
  // As ConnectionManager::connect: `done` runs exactly once, on the loop, never inside.
  virtual void connect(const ConnectionParams& params, ConnectCallback done) = 0;
  virtual Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                                  AcceptCallback on_accept) = 0;

  // A messenger over several loops (Messenger::Front): this (loop 0's) factory listens,
  // and each accepted connection is routed by its connector's affinity (an RDMA connect
  // request's; a TCP connection's hello's node id) to shard owner(affinity), whose factory
  // is shards[i] and whose accept callback, run on its loop, is accepted[i]. Over RDMA
  // called before the loops run. Default: Errc::not_supported; the ConnectionManager's
  // router (listen with an AcceptRouting, accept_routed) is how the ConnectionManager
  // factory does it (docs/messenger.md, Threading).
  virtual Result<Listener> listen_routed(
      [[maybe_unused]] const SocketAddress& address,
      [[maybe_unused]] const ConnectionParams& params,
      [[maybe_unused]] std::span<StreamFactory* const> shards,
      [[maybe_unused]] std::function<std::size_t(std::uint64_t)> owner,
      [[maybe_unused]] std::vector<AcceptCallback> accepted) {
    return make_error_code(Errc::not_supported);
  }
  // The affinity this factory's connects carry (the messenger's node id), for the peer's
  // listen_routed. Default: not sent.
  virtual void set_affinity([[maybe_unused]] std::uint64_t affinity) {}
  // The shard's counters, where the factory counts what it does for the messenger (the
  // routing of accepted TCP connections: msg.route.*). They outlive its listeners.
  virtual void set_counters([[maybe_unused]] CounterSet& counters) {}
};

// The ConnectionManager's streams (what Messenger::create uses): one manager per loop,
// with `options`' max_connections.
std::function<Result<std::unique_ptr<StreamFactory>>(EventLoop&)> manager_streams(
    const MessengerOptions& options);

struct MessengerAccess {
  static Result<std::unique_ptr<Messenger>> create(EventLoop& loop, const MessengerOptions& options,
                                                   std::unique_ptr<StreamFactory> streams,
                                                   Messenger::DispatchCallback dispatch,
                                                   Messenger::EventCallback on_event);
  // Over several loops, with one factory made per loop (make_streams is called on the
  // creating thread, once per loop, in order).
  static Result<std::unique_ptr<Messenger>> create(
      std::span<EventLoop* const> loops, const MessengerOptions& options,
      const std::function<Result<std::unique_ptr<StreamFactory>>(EventLoop&)>& make_streams,
      Messenger::DispatchCallback dispatch, Messenger::EventCallback on_event);
  // The shards behind a messenger (tests; the layer above uses msg/messenger_port.h).
  static Messenger::Front& front(Messenger& m) noexcept;
  // What listen(address) and add_peer(peer, address) ask instead of
  // rdma_device_available(), so that a test asserts one behaviour on any machine (a
  // probe answering false: a host without a device); null restores the real look. Per
  // process; set it while no messenger calls them.
  static void set_device_probe(bool (*probe)()) noexcept;
};

}  // namespace rmsg
