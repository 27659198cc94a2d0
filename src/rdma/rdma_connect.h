// The active connect with an explicit resource seam: the connection manager passes hooks
// that hand out recycled connection structures; rdma_connect passes the defaults.
#pragma once

#include "rdma/resources.h"
#include "rmsg/address.h"
#include "rmsg/event_loop.h"
#include "rmsg/rdma.h"
#include "rmsg/stream.h"

namespace rmsg::rdma {

// As rmsg::rdma_connect, with `hooks` obtaining and releasing the connection structure.
void connect_with(EventLoop& loop, const SocketAddress& peer, const RdmaOptions& options,
                  ResourceHooks hooks, ConnectCallback done);

}  // namespace rmsg::rdma
