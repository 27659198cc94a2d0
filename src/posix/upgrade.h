// The seam between the shim's core and its RDMA upgrade engine (docs/socket-shim.md, "The
// RDMA upgrade"). The core knows nothing of RDMA: at listen(), at an established
// connection and at the last close it asks the engine through g_upgrade_hooks, and while a
// connection's SocketObject::upgrade is set, its data calls, shutdown and readiness go
// through the engine. Null hooks (the preload and librmsg-socket of this version, a
// TCP-only build): every connection stays the kernel's TCP, fallback `not_built`.
//
// Threads: every hook may be called from any program thread; the engine runs its own loop
// thread. The upgraded data path takes a mutex (not async-signal-safe); the TCP path of a
// connection without `upgrade` is untouched.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>

#include "posix/socket_object.h"

namespace rmsg::posix {

struct UpgradeHooks {
  // A managed socket at fd started listening.
  void (*listening)(int fd, SocketObject& o);
  // A managed connection at fd is established: accepted (acceptor) or connected. The
  // engine may set o.upgrade and o.fallback.
  void (*established)(int fd, SocketObject& o, bool acceptor);
  // A non-blocking connect() at fd is under way (EINPROGRESS; o.peer is set): the engine
  // takes the connection's data calls from now, so that the cut-over offset counts every
  // byte, and attempts the upgrade once the kernel says it connected.
  void (*connecting)(int fd, SocketObject& o);
  // Data calls on a connection with o.upgrade set: the C library's meaning and errno.
  ssize_t (*recv)(UpgradeConn& c, int fd, const iovec* iov, int n, int flags);
  ssize_t (*send)(UpgradeConn& c, int fd, const iovec* iov, int n, int flags);
  int (*shutdown)(UpgradeConn& c, int fd, int how);
  // The engine's readiness descriptor of the connection (an eventfd: readable when RDMA
  // bytes, end of stream or an error wait, or the state changed).
  int (*readiness_fd)(UpgradeConn& c);
  // poll/select on the connection: before the call, the events to ask of the TCP socket
  // for the program's `events` (input no longer counts after the read side cut over,
  // output after the write side did) and the engine's descriptors to watch beside it
  // (-1: none): *in_fd for input (watch POLLIN), *out_fd for room in the send buffer
  // (watch POLLOUT). After it, the program's revents from the TCP socket's and whether
  // each of the two answered.
  short (*poll_prepare)(UpgradeConn& c, short events, int* in_fd, int* out_fd);
  short (*poll_result)(UpgradeConn& c, short events, short tcp_revents, bool in, bool out);
  // The program's epoll_ctl on the connection at fd succeeded (or, at adoption, one it made
  // before, replayed as EPOLL_CTL_ADD): the engine records it and keeps its eventfds in the
  // set beside fd with the same data, so that RDMA readiness reaches the set
  // (upgrade_readiness.cc).
  void (*epoll_mirror)(UpgradeConn& c, int epfd, int op, int fd, const epoll_event* ev);
  // The program is about to close its last number of the connection, fd (still open): the
  // engine removes fd and its eventfd from the sets it saw (the kernel would drop fd's entry
  // at this close were it not for the engine's own duplicate of the socket).
  void (*closing)(UpgradeConn& c, int fd);
  // The program closed the connection's last descriptor (o.upgrade already cleared): the
  // engine finishes it (flush, FIN or reset) on its own and forgets o.
  void (*closed)(UpgradeConn& c, SocketObject& o);
};

extern std::atomic<const UpgradeHooks*> g_upgrade_hooks;

inline const UpgradeHooks* upgrade_hooks() {
  return g_upgrade_hooks.load(std::memory_order_acquire);
}

// The core (calls_readiness.cc): the engine just took the connection at fd: the epoll
// registrations the program made on fd before are handed to its mirror.
struct Runtime;
void mirror_recorded(Runtime& rt, int fd);

}  // namespace rmsg::posix
