// The active connect and the passive listen with an explicit resource seam: the
// connection manager passes hooks that hand out (and take back) recycled connection
// structures and observe the setup steps; rdma_connect / rdma_listen pass the defaults.
#pragma once

#include "rdma/resources.h"
#include "rmsg/address.h"
#include "rmsg/event_loop.h"
#include "rmsg/rdma.h"
#include "rmsg/stream.h"

namespace rmsg::rdma {

// As rmsg::rdma_connect, with `hooks` obtaining and releasing the connection structure;
// the stream holds `lease` until it is released (RdmaStream::create).
void connect_with(EventLoop& loop, const SocketAddress& peer, const RdmaOptions& options,
                  ResourceHooks hooks, Lease lease, ConnectCallback done);

// As rmsg::rdma_listen; every accepted stream obtains and releases its structure through
// `hooks` (empty hooks: build and destroy).
Result<Listener> listen_with(EventLoop& loop, const SocketAddress& address,
                             const RdmaOptions& options, ResourceHooks hooks,
                             AcceptCallback on_accept);

}  // namespace rmsg::rdma
