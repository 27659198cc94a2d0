// Graceful close's background half: a socket whose Stream was closed after
// shutdown_write() stays open, owned by a per-loop service, until the peer's EOF shows
// that it has everything we sent (our FIN included). Until then the service reads and
// discards what the peer still sends, so that unread input never turns the close into a
// reset. Past the linger timeout, on an error, or when the loop is destroyed, the socket
// closes abortively (RST). Loop-thread-only.
#pragma once

#include "rmsg/event_loop.h"

namespace rmsg::tcp {

// Takes ownership of `fd` (connected, non-blocking, its write side already shut down).
void linger(EventLoop& loop, int fd, Duration timeout);

// Sockets lingering on `loop` now (for tests and counters).
std::size_t lingering(EventLoop& loop);

}  // namespace rmsg::tcp
