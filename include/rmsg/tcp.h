// TCP transport: rmsg::Stream and rmsg::Listener over non-blocking TCP sockets.
//
// Threading: tcp_listen/tcp_connect and everything they produce are loop-thread-only (the
// loop passed in). The loop must outlive every Listener and Stream created on it, and
// every connect still in flight (destroying the loop drops a pending connect silently:
// its socket is closed and its callback never runs).
//
// Addresses are numeric (rmsg::SocketAddress): nothing here resolves names or blocks.
//
// Stream behaviour specific to TCP (the contract itself is in rmsg/stream.h):
//   - write() sends with MSG_NOSIGNAL: a broken connection is an error value, not SIGPIPE.
//   - An empty span passed to read()/write() is Errc::invalid_argument (a read of 0 bytes
//     would be indistinguishable from end of stream).
//   - shutdown_write() is shutdown(SHUT_WR): the peer reads every byte, then EOF (0).
//   - close() (and destroying the Stream) after shutdown_write() is graceful: the socket
//     passes to the loop, which reads and discards whatever the peer still sends until
//     its EOF, then closes it quietly (FIN only, never an RST: unread input would make
//     the kernel reset the connection and destroy a reply the peer has not read yet).
//     It is aborted (SO_LINGER {1, 0}: RST) when TcpOptions::linger_timeout passes
//     first, on a socket error, or when the loop is destroyed first. A connection that
//     had already read EOF closes at once, quietly.
//   - close() without shutdown_write() is abortive: SO_LINGER {1, 0}, so the kernel drops
//     unsent bytes and sends RST; the peer's next read/write fails with
//     Errc::connection_reset.
//   - Readiness follows rmsg/stream.h's rule over level-triggered epoll; the socket is
//     not watched at all while no callback is armed.
//   - Error mapping: ECONNREFUSED -> connection_refused, ECONNRESET -> connection_reset,
//     EPIPE -> peer_closed, ETIMEDOUT -> timeout, ENETUNREACH/EHOSTUNREACH -> unreachable;
//     other errno values are returned in std::system_category().
#pragma once

#include <sys/socket.h>

#include <chrono>

#include "rmsg/address.h"
#include "rmsg/event_loop.h"
#include "rmsg/export.h"
#include "rmsg/result.h"
#include "rmsg/stream.h"

namespace rmsg {

struct RMSG_EXPORT TcpOptions {
  bool nodelay = true;  // TCP_NODELAY: small writes leave at once (latency over batching)
  int send_buffer = 0;  // SO_SNDBUF in bytes; 0 keeps the kernel's autotuning
  int recv_buffer = 0;  // SO_RCVBUF in bytes; 0 keeps the kernel's autotuning
  // Connect deadline; zero or negative leaves only the kernel's SYN retries (minutes).
  Duration connect_timeout = std::chrono::seconds(10);
  int backlog = SOMAXCONN;  // listen() backlog
  // How long a graceful close (close() after shutdown_write()) waits for the peer's EOF
  // before it aborts (RST). Zero or negative: close() is always abortive.
  Duration linger_timeout = std::chrono::seconds(5);
};

// Binds and listens on `address` (port 0 picks a free port: read it from Listener::port()).
// `on_accept` runs on the loop thread with every accepted, connected Stream; accepting
// goes on until the Listener is closed or destroyed. Errors (returned at once):
// Errc::invalid_argument (no address), EADDRINUSE, EACCES, EMFILE, ... (system category).
// When the process runs out of descriptors while accepting, the listener pauses for a
// moment instead of spinning; the pending connection waits in the backlog.
RMSG_EXPORT Result<Listener> tcp_listen(EventLoop& loop, const SocketAddress& address,
                                        const TcpOptions& options, AcceptCallback on_accept);

// Starts a connection and returns at once. `callback` runs exactly once, on the loop
// thread and never inside this call, with the connected Stream or an error:
// Errc::connection_refused, Errc::timeout (options.connect_timeout passed),
// Errc::unreachable, Errc::invalid_argument (no address), or a system error (EMFILE...).
RMSG_EXPORT void tcp_connect(EventLoop& loop, const SocketAddress& address,
                             const TcpOptions& options, ConnectCallback callback);

}  // namespace rmsg
