// The data calls. On the TCP path the program's descriptor is the kernel's TCP socket, so
// each call is the C library's, plus a count of the bytes for the stats line: no lock, no
// allocation, errno untouched (async-signal-safe wherever the C library's call is).
// MSG_PEEK reads touch the connection but count nothing; SIGPIPE and MSG_NOSIGNAL are the
// kernel's. splice() counts like a read on its input and a write on its output.
#include <fcntl.h>
#include <sys/sendfile.h>

#include "posix/calls_io.h"
#include "posix/runtime.h"
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

}  // namespace

extern "C" {

ssize_t rmsg_read(int fd, void* buf, size_t n) {
  Runtime* rt = runtime();
  ssize_t r = g_real.read(fd, buf, n);
  count_in(rt, fd, r);
  return r;
}

ssize_t rmsg_readv(int fd, const iovec* iov, int iovcnt) {
  Runtime* rt = runtime();
  ssize_t r = g_real.readv(fd, iov, iovcnt);
  count_in(rt, fd, r);
  return r;
}

ssize_t rmsg_recv(int fd, void* buf, size_t n, int flags) {
  Runtime* rt = runtime();
  ssize_t r = g_real.recv(fd, buf, n, flags);
  count_in(rt, fd, r, flags);
  return r;
}

ssize_t rmsg_recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* addr, socklen_t* len) {
  Runtime* rt = runtime();
  ssize_t r = g_real.recvfrom(fd, buf, n, flags, addr, len);
  count_in(rt, fd, r, flags);
  return r;
}

ssize_t rmsg_recvmsg(int fd, msghdr* msg, int flags) {
  Runtime* rt = runtime();
  ssize_t r = g_real.recvmsg(fd, msg, flags);
  count_in(rt, fd, r, flags);
  return r;
}

ssize_t rmsg_write(int fd, const void* buf, size_t n) {
  Runtime* rt = runtime();
  ssize_t r = g_real.write(fd, buf, n);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_writev(int fd, const iovec* iov, int iovcnt) {
  Runtime* rt = runtime();
  ssize_t r = g_real.writev(fd, iov, iovcnt);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_send(int fd, const void* buf, size_t n, int flags) {
  Runtime* rt = runtime();
  ssize_t r = g_real.send(fd, buf, n, flags);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* addr,
                    socklen_t len) {
  Runtime* rt = runtime();
  ssize_t r = g_real.sendto(fd, buf, n, flags, addr, len);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_sendmsg(int fd, const msghdr* msg, int flags) {
  Runtime* rt = runtime();
  ssize_t r = g_real.sendmsg(fd, msg, flags);
  count_out(rt, fd, r);
  return r;
}

ssize_t rmsg_sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  Runtime* rt = runtime();
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
