// The messenger's internal seam: where its Streams come from. The public Messenger uses
// the ConnectionManager (TCP and RDMA); tests plug in the loopback stream with its fault
// injector, or wrap real streams so that they can kill them under a session. Not
// installed.
//
// Threading: the messenger's loop thread.
#pragma once

#include <memory>

#include "rmsg/connection_manager.h"
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
};

// The ConnectionManager's streams (what Messenger::create uses).
Result<std::unique_ptr<StreamFactory>> make_manager_stream_factory(EventLoop& loop);

struct MessengerAccess {
  static Result<std::unique_ptr<Messenger>> create(EventLoop& loop, const MessengerOptions& options,
                                                   std::unique_ptr<StreamFactory> streams,
                                                   Messenger::DispatchCallback dispatch,
                                                   Messenger::EventCallback on_event);
  // send_tracked() that a drain (Messenger::shutdown(deadline, done)) still accepts: RPC
  // answers requests that arrive meanwhile (status shutting_down). messenger_drain.cc.
  // Stops (or resumes) reading `peer`'s connections: the receiving side's bound (RPC's
  // max_pending_requests). The peer's writes back up into its queue; nothing is dropped.
  static void set_paused(Messenger& m, NodeId peer, bool paused);
  static Result<Messenger::Ticket> send_while_draining(Messenger& m, NodeId peer,
                                                       std::vector<std::byte> payload,
                                                       const Messenger::SendOptions& options);
};

}  // namespace rmsg
