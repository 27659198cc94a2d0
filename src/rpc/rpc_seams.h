// RPC's internal seam: an endpoint over a given source of streams (the loopback stream in
// unit tests, killable real streams in TCP/RDMA tests). Not installed.
//
// Threading: the endpoint's loop thread.
#pragma once

#include <memory>

#include "msg/seams.h"
#include "rmsg/rpc.h"

namespace rmsg {

struct RpcAccess {
  static Result<std::unique_ptr<RpcEndpoint>> create(EventLoop& loop, const RpcOptions& options,
                                                     std::unique_ptr<StreamFactory> streams,
                                                     Messenger::EventCallback on_event);
  // What the endpoint keeps about peers, summed over its shards (loop threads quiet).
  struct PeerState {
    std::size_t peers = 0;    // per-peer entries (counters, held replies, waiting requests)
    std::size_t dedupe = 0;   // dedupe table entries
    std::size_t pending = 0;  // pending responders
  };
  static PeerState peer_state(const RpcEndpoint& ep);
};

}  // namespace rmsg
