// The data calls. On the TCP path the program's descriptor is the kernel's TCP socket, so
// each call is the C library's, plus a count of the bytes for the stats line: no lock, no
// allocation, errno untouched (async-signal-safe wherever the C library's call is).
// MSG_PEEK reads touch the connection but count nothing; SIGPIPE and MSG_NOSIGNAL are the
// kernel's. splice() counts like a read on its input and a write on its output.
#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "posix/calls_io.h"
#include "posix/runtime.h"
#include "posix/upgrade.h"
#include "rmsg/socket.h"

using namespace rmsg::posix;

namespace {

inline void count_in(Runtime* rt, int fd, ssize_t r, int flags = 0) {
  if (rt == nullptr || r < 0) return;
  SocketObject* o = rt->table.object(fd);
  if (o == nullptr) return;
  touch(*rt, o);
  if (r > 0 && (flags & MSG_PEEK) == 0) {
    o->bytes_in.fetch_add(static_cast<std::uint64_t>(r), std::memory_order_relaxed);
    moved_bytes(o);
  }
}

inline void count_out(Runtime* rt, int fd, ssize_t r) {
  if (rt == nullptr || r < 0) return;
  SocketObject* o = rt->table.object(fd);
  if (o == nullptr) return;
  touch(*rt, o);
  if (r > 0) {
    o->bytes_out.fetch_add(static_cast<std::uint64_t>(r), std::memory_order_relaxed);
    moved_bytes(o);
  }
}

// The engine's connection when fd is a connection it handles (its data calls go there).
inline UpgradeConn* upgraded(Runtime* rt, int fd) {
  if (rt == nullptr) return nullptr;
  SocketObject* o = rt->table.object(fd);
  return o == nullptr ? nullptr : o->upgrade.load(std::memory_order_acquire);
}

ssize_t up_recv(UpgradeConn* c, int fd, void* buf, size_t n, int flags) {
  iovec v{buf, n};
  return upgrade_hooks()->recv(*c, fd, &v, 1, flags);
}

ssize_t up_send(UpgradeConn* c, int fd, const void* buf, size_t n, int flags) {
  iovec v{const_cast<void*>(buf), n};
  return upgrade_hooks()->send(*c, fd, &v, 1, flags);
}

}  // namespace

extern "C" {

ssize_t rmsg_read(int fd, void* buf, size_t n) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) return up_recv(c, fd, buf, n, 0);
  ssize_t r = g_real.read(fd, buf, n);
  count_in(rt, fd, r);
  return r;
}

ssize_t rmsg_readv(int fd, const iovec* iov, int iovcnt) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) return upgrade_hooks()->recv(*c, fd, iov, iovcnt, 0);
  ssize_t r = g_real.readv(fd, iov, iovcnt);
  count_in(rt, fd, r);
  return r;
}

ssize_t rmsg_recv(int fd, void* buf, size_t n, int flags) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) return up_recv(c, fd, buf, n, flags);
  ssize_t r = g_real.recv(fd, buf, n, flags);
  count_in(rt, fd, r, flags);
  return r;
}

ssize_t rmsg_recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* addr, socklen_t* len) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) {
    if (addr != nullptr && len != nullptr) *len = 0;  // a connected stream names no source
    return up_recv(c, fd, buf, n, flags);
  }
  ssize_t r = g_real.recvfrom(fd, buf, n, flags, addr, len);
  count_in(rt, fd, r, flags);
  return r;
}

ssize_t rmsg_recvmsg(int fd, msghdr* msg, int flags) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) {
    msg->msg_namelen = 0;
    msg->msg_controllen = 0;
    msg->msg_flags = 0;
    return upgrade_hooks()->recv(*c, fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  }
  ssize_t r = g_real.recvmsg(fd, msg, flags);
  count_in(rt, fd, r, flags);
  return r;
}

ssize_t rmsg_write(int fd, const void* buf, size_t n) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) return up_send(c, fd, buf, n, 0);
  ssize_t r = g_real.write(fd, buf, n);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_writev(int fd, const iovec* iov, int iovcnt) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) return upgrade_hooks()->send(*c, fd, iov, iovcnt, 0);
  ssize_t r = g_real.writev(fd, iov, iovcnt);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_send(int fd, const void* buf, size_t n, int flags) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) return up_send(c, fd, buf, n, flags);
  ssize_t r = g_real.send(fd, buf, n, flags);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* addr,
                    socklen_t len) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) return up_send(c, fd, buf, n, flags);
  ssize_t r = g_real.sendto(fd, buf, n, flags, addr, len);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_sendmsg(int fd, const msghdr* msg, int flags) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, fd)) {
    return upgrade_hooks()->send(*c, fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  }
  ssize_t r = g_real.sendmsg(fd, msg, flags);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  Runtime* rt = runtime();
  if (UpgradeConn* c = upgraded(rt, out_fd)) {
    // The kernel cannot send a file into an RDMA stream: read a piece, write it.
    char piece[16384];
    size_t want = count < sizeof piece ? count : sizeof piece;
    ssize_t got = offset != nullptr ? pread(in_fd, piece, want, *offset) : read(in_fd, piece, want);
    if (got <= 0) return got;
    ssize_t w = up_send(c, out_fd, piece, static_cast<size_t>(got), 0);
    if (w < 0) return w;
    if (offset != nullptr) {
      *offset += w;
    } else if (w < got) {
      lseek(in_fd, w - got, SEEK_CUR);
    }
    return w;
  }
  ssize_t r = g_real.sendfile(out_fd, in_fd, offset, count);
  count_in(rt, in_fd, r);  // a socket as in_fd (out_fd a pipe): the kernel splices
  count_out(rt, out_fd, r);
  return r;
}

}  // extern "C"

namespace rmsg::posix {

ssize_t splice_counted(int in_fd, loff_t* in_off, int out_fd, loff_t* out_off, size_t len,
                       unsigned flags) {
  Runtime* rt = runtime();
  ssize_t r = g_real.splice(in_fd, in_off, out_fd, out_off, len, flags);
  count_in(rt, in_fd, r);
  count_out(rt, out_fd, r);
  return r;
}

}  // namespace rmsg::posix
