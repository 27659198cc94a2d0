// Graceful close's background half: a socket whose Stream was closed after
// shutdown_write() stays open, owned by a per-loop service, until the peer's EOF shows
// that it has everything we sent (our FIN included). Until then the service reads and
// discards what the peer still sends, so that unread input never turns the close into a
// reset. Past the linger timeout, on an error, or when the loop is destroyed, the socket
// closes abortively (RST). Loop-thread-only.
#pragma once

#include "base/lease.h"
#include "rmsg/event_loop.h"
#include "rmsg/stream.h"

namespace rmsg::tcp {

// Takes ownership of `fd` (connected, non-blocking, its write side already shut down)
// and of `lease` (a connection manager's count of it, connection_limit.h), dropped when
// the socket is closed.
void linger(EventLoop& loop, int fd, Duration timeout, Lease lease = {});

// Sockets lingering on `loop` now (for tests and counters).
std::size_t lingering(EventLoop& loop);

// Gives a TCP stream a lease to hold until it is released (close(), or the end of its
// linger). False when `stream` is not a TCP stream.
bool hold_lease(Stream& stream, Lease lease);

}  // namespace rmsg::tcp
