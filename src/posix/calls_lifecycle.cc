// socket, bind, listen, accept, connect, shutdown: the kernel does the work; the shim
// records which sockets are TCP connections it manages, their state and their peer.
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "posix/runtime.h"
#include "posix/upgrade.h"
#include "rmsg/socket.h"

using namespace rmsg::posix;

namespace {

bool is_tcp(int domain, int type, int protocol) {
  int base_type = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  return (domain == AF_INET || domain == AF_INET6) && base_type == SOCK_STREAM &&
         (protocol == 0 || protocol == IPPROTO_TCP);
}

void remember_peer(SocketObject& o, const sockaddr* addr, socklen_t len) {
  if (addr == nullptr) return;
  sockaddr_in6 peer{};
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    std::memcpy(&peer, addr, sizeof(sockaddr_in));
  } else if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    std::memcpy(&peer, addr, sizeof(sockaddr_in6));
  } else {
    return;
  }
  o.peer = peer;
}

// The managed socket behind fd when this process may change it, else null.
SocketObject* own_object(Runtime* rt, int fd) {
  if (rt == nullptr) return nullptr;
  SocketObject* o = rt->table.object(fd);
  if (o == nullptr || foreign_process(*rt)) return nullptr;
  return o;
}

}  // namespace

extern "C" {

int rmsg_socket(int domain, int type, int protocol) {
  Runtime* rt = runtime();
  int fd = g_real.socket(domain, type, protocol);
  if (fd < 0 || rt == nullptr || !is_tcp(domain, type, protocol)) return fd;
  if (!foreign_process(*rt)) adopt(*rt, fd, SocketState::fresh);
  return fd;
}

int rmsg_bind(int fd, const sockaddr* addr, socklen_t len) {
  runtime();
  return g_real.bind(fd, addr, len);
}

int rmsg_listen(int fd, int backlog) {
  Runtime* rt = runtime();
  SocketObject* o = own_object(rt, fd);
  const UpgradeHooks* h = o != nullptr ? upgrade_hooks() : nullptr;
  // The engine's rdma_cm listener goes up before the kernel's: a client that connects as
  // soon as the kernel listens (one retrying until the server is up) would otherwise
  // reach a port without it and take the answer for a peer without the shim. A socket
  // without a port yet gets one from listen(), so its engine listener follows.
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  bool early = h != nullptr && g_real.getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 &&
               reinterpret_cast<sockaddr_in&>(a).sin_port != 0;  // same offset in sockaddr_in6
  if (early) {
    int saved = errno;
    h->listening(fd, *o);
    errno = saved;
  }
  int rc = g_real.listen(fd, backlog);
  if (rc == 0 && o != nullptr) {
    o->state.store(SocketState::listening, std::memory_order_release);
    if (h != nullptr && !early) {
      int saved = errno;
      h->listening(fd, *o);
      errno = saved;
    }
  }
  return rc;
}

int rmsg_accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  Runtime* rt = runtime();
  SocketObject* listener = own_object(rt, fd);
  if (listener == nullptr) return g_real.accept4(fd, addr, len, flags);
  // The shim reads none of the caller's memory (bad pointers are the kernel's EFAULT, and
  // truncation its own): without a buffer of the caller's the kernel writes the peer into
  // the shim's; with one, the shim asks the kernel again.
  sockaddr_in6 own{};
  socklen_t own_len = sizeof own;
  int c = addr == nullptr ? g_real.accept4(fd, reinterpret_cast<sockaddr*>(&own), &own_len, flags)
                          : g_real.accept4(fd, addr, len, flags);
  if (c < 0) return c;
  if (SocketObject* o = adopt(*rt, c, SocketState::connected)) {
    int saved = errno;
    if (addr != nullptr) {
      own_len = sizeof own;
      if (g_real.getpeername(c, reinterpret_cast<sockaddr*>(&own), &own_len) != 0) own_len = 0;
    }
    errno = saved;
    remember_peer(*o, reinterpret_cast<sockaddr*>(&own), own_len);
    if (const UpgradeHooks* h = upgrade_hooks()) {
      h->established(c, *o, true);
      mirror_recorded(*rt, c);
      errno = saved;
    }
  }
  return c;
}

int rmsg_accept(int fd, sockaddr* addr, socklen_t* len) {
  return rmsg_accept4(fd, addr, len, 0);  // the same system call semantics
}

int rmsg_connect(int fd, const sockaddr* addr, socklen_t len) {
  Runtime* rt = runtime();
  SocketObject* o = own_object(rt, fd);
  int rc = g_real.connect(fd, addr, len);
  if (o == nullptr) return rc;
  int saved = errno;
  // The peer is copied only once the kernel has read the address (a bad pointer stays
  // the kernel's EFAULT).
  if (rc == 0) {
    remember_peer(*o, addr, len);
    o->state.store(SocketState::connected, std::memory_order_release);
    const UpgradeHooks* h = upgrade_hooks();
    if (h != nullptr && o->upgrade.load(std::memory_order_acquire) == nullptr) {
      h->established(fd, *o, false);
      if (rt != nullptr) mirror_recorded(*rt, fd);
    }
  } else if (errno == EINPROGRESS || errno == EINTR || errno == EALREADY) {
    // Completes in the kernel; readiness (POLLOUT, SO_ERROR) is the kernel's. Whether it
    // did is settled when bytes move or at the last close (settle_connect).
    remember_peer(*o, addr, len);
    o->state.store(SocketState::connecting, std::memory_order_release);
    const UpgradeHooks* h = upgrade_hooks();
    if (h != nullptr && errno != EALREADY &&
        o->upgrade.load(std::memory_order_acquire) == nullptr) {
      h->connecting(fd, *o);
      if (rt != nullptr) mirror_recorded(*rt, fd);
    }
  }
  errno = saved;
  return rc;
}

int rmsg_shutdown(int fd, int how) {
  Runtime* rt = runtime();
  if (rt != nullptr) {
    if (SocketObject* o = rt->table.object(fd)) {
      if (UpgradeConn* c = o->upgrade.load(std::memory_order_acquire)) {
        return upgrade_hooks()->shutdown(*c, fd, how);
      }
    }
  }
  return g_real.shutdown(fd, how);
}

int rmsg_is_managed(int fd) {
  Runtime* rt = runtime();
  return rt != nullptr && rt->table.object(fd) != nullptr ? 1 : 0;
}

}  // extern "C"
