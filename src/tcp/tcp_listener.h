// The passive open below tcp_listen: a listener that yields accepted sockets, not Streams,
// so that a connection manager can count, read and route one before it becomes a Stream on
// whichever loop it belongs to (cm/tcp_router.h). Loop-thread-only.
#pragma once

#include <functional>

#include "rmsg/tcp.h"
#include "tcp/tcp_socket.h"

namespace rmsg::tcp {

// Runs on the loop thread with every accepted socket: connected, non-blocking,
// close-on-exec, `options` applied; the callee owns it.
using SocketCallback = std::function<void(OwnedSocket socket)>;

// As rmsg::tcp_listen (errors, the pause when out of descriptors), with sockets.
Result<Listener> listen_sockets(EventLoop& loop, const SocketAddress& address,
                                const TcpOptions& options, SocketCallback on_socket);

}  // namespace rmsg::tcp
