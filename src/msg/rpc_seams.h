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
};

}  // namespace rmsg
