// socket, bind, listen, accept, connect, shutdown: the kernel does the work; the shim
// records which sockets are TCP connections it manages, their state and their peer.
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "posix/runtime.h"
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
  int rc = g_real.listen(fd, backlog);
  if (rc == 0) {
    if (SocketObject* o = own_object(rt, fd)) {
      o->state.store(SocketState::listening, std::memory_order_release);
    }
  }
  return rc;
}

int rmsg_accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  Runtime* rt = runtime();
  SocketObject* listener = own_object(rt, fd);
  if (listener == nullptr || (addr != nullptr && len == nullptr)) {
    return g_real.accept4(fd, addr, len, flags);
  }
  // The peer is read from the kernel's answer: in the caller's buffer when it gave one (so
  // EFAULT and truncation stay the kernel's), else in the shim's own.
  sockaddr_in6 own{};
  socklen_t own_len = sizeof own;
  sockaddr* where = addr != nullptr ? addr : reinterpret_cast<sockaddr*>(&own);
  socklen_t* where_len = addr != nullptr ? len : &own_len;
  socklen_t room = *where_len;
  int c = g_real.accept4(fd, where, where_len, flags);
  if (c < 0) return c;
  if (SocketObject* o = adopt(*rt, c, SocketState::connected)) {
    remember_peer(*o, where, *where_len < room ? *where_len : room);
  }
  return c;
}

int rmsg_accept(int fd, sockaddr* addr, socklen_t* len) {
  return rmsg_accept4(fd, addr, len, 0);  // the same system call semantics
}

int rmsg_connect(int fd, const sockaddr* addr, socklen_t len) {
  Runtime* rt = runtime();
  SocketObject* o = own_object(rt, fd);
  if (o != nullptr) remember_peer(*o, addr, len);
  int rc = g_real.connect(fd, addr, len);
  if (o == nullptr) return rc;
  int saved = errno;
  if (rc == 0) {
    o->state.store(SocketState::connected, std::memory_order_release);
  } else if (errno == EINPROGRESS || errno == EINTR || errno == EALREADY) {
    // Completes in the kernel; readiness (POLLOUT, SO_ERROR) is the kernel's.
    o->state.store(SocketState::connecting, std::memory_order_release);
  }
  errno = saved;
  return rc;
}

int rmsg_shutdown(int fd, int how) {
  runtime();
  return g_real.shutdown(fd, how);
}

int rmsg_is_managed(int fd) {
  Runtime* rt = runtime();
  return rt != nullptr && rt->table.object(fd) != nullptr ? 1 : 0;
}

}  // extern "C"
