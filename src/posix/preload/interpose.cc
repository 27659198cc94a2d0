// librmsg-preload.so's exported names: each is the C library's call of that name, answered
// by rmsg's socket API (rmsg/socket.h). The definitions carry other C++ names and take the
// C library's names through asm labels, so they never clash with the C library's own
// declarations; exports.map makes these the only symbols the library exports.
//
// The _FORTIFY_SOURCE variants check as glibc's do (and fail through glibc's __chk_fail),
// then run the plain call; without them a fortified program's reads would bypass the shim.
#include <fcntl.h>
#include <sys/sendfile.h>

#include <cstdarg>

#include "posix/calls_io.h"
#include "posix/runtime.h"
#include "rmsg/socket.h"

extern "C" [[noreturn]] void __chk_fail(void);

#define RMSG_INTERPOSE(ret, shim_name, real_name, params) \
  extern "C" __attribute__((visibility("default"))) ret shim_name params __asm__(real_name)

RMSG_INTERPOSE(int, shim_socket, "socket", (int, int, int));
RMSG_INTERPOSE(int, shim_bind, "bind", (int, const sockaddr*, socklen_t));
RMSG_INTERPOSE(int, shim_listen, "listen", (int, int));
RMSG_INTERPOSE(int, shim_accept, "accept", (int, sockaddr*, socklen_t*));
RMSG_INTERPOSE(int, shim_accept4, "accept4", (int, sockaddr*, socklen_t*, int));
RMSG_INTERPOSE(int, shim_connect, "connect", (int, const sockaddr*, socklen_t));
RMSG_INTERPOSE(int, shim_shutdown, "shutdown", (int, int));
RMSG_INTERPOSE(int, shim_close, "close", (int));
RMSG_INTERPOSE(int, shim_close_range, "close_range", (unsigned int, unsigned int, int));
RMSG_INTERPOSE(void, shim_closefrom, "closefrom", (int));
RMSG_INTERPOSE(int, shim_dup, "dup", (int));
RMSG_INTERPOSE(int, shim_dup2, "dup2", (int, int));
RMSG_INTERPOSE(int, shim_dup3, "dup3", (int, int, int));
RMSG_INTERPOSE(ssize_t, shim_read, "read", (int, void*, size_t));
RMSG_INTERPOSE(ssize_t, shim_read_chk, "__read_chk", (int, void*, size_t, size_t));
RMSG_INTERPOSE(ssize_t, shim_readv, "readv", (int, const iovec*, int));
RMSG_INTERPOSE(ssize_t, shim_recv, "recv", (int, void*, size_t, int));
RMSG_INTERPOSE(ssize_t, shim_recv_chk, "__recv_chk", (int, void*, size_t, size_t, int));
RMSG_INTERPOSE(ssize_t, shim_recvfrom, "recvfrom",
               (int, void*, size_t, int, sockaddr*, socklen_t*));
RMSG_INTERPOSE(ssize_t, shim_recvfrom_chk, "__recvfrom_chk",
               (int, void*, size_t, size_t, int, sockaddr*, socklen_t*));
RMSG_INTERPOSE(ssize_t, shim_recvmsg, "recvmsg", (int, msghdr*, int));
RMSG_INTERPOSE(ssize_t, shim_write, "write", (int, const void*, size_t));
RMSG_INTERPOSE(ssize_t, shim_writev, "writev", (int, const iovec*, int));
RMSG_INTERPOSE(ssize_t, shim_send, "send", (int, const void*, size_t, int));
RMSG_INTERPOSE(ssize_t, shim_sendto, "sendto",
               (int, const void*, size_t, int, const sockaddr*, socklen_t));
RMSG_INTERPOSE(ssize_t, shim_sendmsg, "sendmsg", (int, const msghdr*, int));
RMSG_INTERPOSE(ssize_t, shim_sendfile, "sendfile", (int, int, off_t*, size_t));
RMSG_INTERPOSE(ssize_t, shim_sendfile64, "sendfile64", (int, int, off64_t*, size_t));
RMSG_INTERPOSE(ssize_t, shim_splice, "splice", (int, loff_t*, int, loff_t*, size_t, unsigned));
RMSG_INTERPOSE(int, shim_fcntl, "fcntl", (int, int, ...));
RMSG_INTERPOSE(int, shim_fcntl64, "fcntl64", (int, int, ...));
RMSG_INTERPOSE(int, shim_ioctl, "ioctl", (int, unsigned long, ...));
RMSG_INTERPOSE(int, shim_getsockopt, "getsockopt", (int, int, int, void*, socklen_t*));
RMSG_INTERPOSE(int, shim_setsockopt, "setsockopt", (int, int, int, const void*, socklen_t));
RMSG_INTERPOSE(int, shim_getsockname, "getsockname", (int, sockaddr*, socklen_t*));
RMSG_INTERPOSE(int, shim_getpeername, "getpeername", (int, sockaddr*, socklen_t*));
RMSG_INTERPOSE(int, shim_poll, "poll", (pollfd*, nfds_t, int));
RMSG_INTERPOSE(int, shim_poll_chk, "__poll_chk", (pollfd*, nfds_t, int, size_t));
RMSG_INTERPOSE(int, shim_ppoll, "ppoll", (pollfd*, nfds_t, const timespec*, const sigset_t*));
RMSG_INTERPOSE(int, shim_ppoll_chk, "__ppoll_chk",
               (pollfd*, nfds_t, const timespec*, const sigset_t*, size_t));
RMSG_INTERPOSE(int, shim_select, "select", (int, fd_set*, fd_set*, fd_set*, timeval*));
RMSG_INTERPOSE(int, shim_pselect, "pselect",
               (int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*));
RMSG_INTERPOSE(int, shim_epoll_create, "epoll_create", (int));
RMSG_INTERPOSE(int, shim_epoll_create1, "epoll_create1", (int));
RMSG_INTERPOSE(int, shim_epoll_ctl, "epoll_ctl", (int, int, int, epoll_event*));
RMSG_INTERPOSE(int, shim_epoll_wait, "epoll_wait", (int, epoll_event*, int, int));
RMSG_INTERPOSE(int, shim_epoll_pwait, "epoll_pwait",
               (int, epoll_event*, int, int, const sigset_t*));

// Start at load time, before the program's constructors; a call that comes earlier (from
// another preloaded library's constructor) starts the shim itself.
__attribute__((constructor)) static void start_shim() {
  rmsg::posix::runtime();
}

int shim_socket(int d, int t, int p) {
  return rmsg_socket(d, t, p);
}
int shim_bind(int fd, const sockaddr* a, socklen_t l) {
  return rmsg_bind(fd, a, l);
}
int shim_listen(int fd, int backlog) {
  return rmsg_listen(fd, backlog);
}
int shim_accept(int fd, sockaddr* a, socklen_t* l) {
  return rmsg_accept(fd, a, l);
}
int shim_accept4(int fd, sockaddr* a, socklen_t* l, int f) {
  return rmsg_accept4(fd, a, l, f);
}
int shim_connect(int fd, const sockaddr* a, socklen_t l) {
  return rmsg_connect(fd, a, l);
}
int shim_shutdown(int fd, int how) {
  return rmsg_shutdown(fd, how);
}
int shim_close(int fd) {
  return rmsg_close(fd);
}
int shim_close_range(unsigned int a, unsigned int b, int f) {
  return rmsg_close_range(a, b, f);
}
void shim_closefrom(int lowfd) {
  rmsg_closefrom(lowfd);
}
int shim_dup(int fd) {
  return rmsg_dup(fd);
}
int shim_dup2(int fd, int n) {
  return rmsg_dup2(fd, n);
}
int shim_dup3(int fd, int n, int f) {
  return rmsg_dup3(fd, n, f);
}

ssize_t shim_read(int fd, void* b, size_t n) {
  return rmsg_read(fd, b, n);
}
ssize_t shim_read_chk(int fd, void* b, size_t n, size_t buflen) {
  if (n > buflen) __chk_fail();
  return rmsg_read(fd, b, n);
}
ssize_t shim_readv(int fd, const iovec* v, int n) {
  return rmsg_readv(fd, v, n);
}
ssize_t shim_recv(int fd, void* b, size_t n, int f) {
  return rmsg_recv(fd, b, n, f);
}
ssize_t shim_recv_chk(int fd, void* b, size_t n, size_t buflen, int f) {
  if (n > buflen) __chk_fail();
  return rmsg_recv(fd, b, n, f);
}
ssize_t shim_recvfrom(int fd, void* b, size_t n, int f, sockaddr* a, socklen_t* l) {
  return rmsg_recvfrom(fd, b, n, f, a, l);
}
ssize_t shim_recvfrom_chk(int fd, void* b, size_t n, size_t buflen, int f, sockaddr* a,
                          socklen_t* l) {
  if (n > buflen) __chk_fail();
  return rmsg_recvfrom(fd, b, n, f, a, l);
}
ssize_t shim_recvmsg(int fd, msghdr* m, int f) {
  return rmsg_recvmsg(fd, m, f);
}
ssize_t shim_write(int fd, const void* b, size_t n) {
  return rmsg_write(fd, b, n);
}
ssize_t shim_writev(int fd, const iovec* v, int n) {
  return rmsg_writev(fd, v, n);
}
ssize_t shim_send(int fd, const void* b, size_t n, int f) {
  return rmsg_send(fd, b, n, f);
}
ssize_t shim_sendto(int fd, const void* b, size_t n, int f, const sockaddr* a, socklen_t l) {
  return rmsg_sendto(fd, b, n, f, a, l);
}
ssize_t shim_sendmsg(int fd, const msghdr* m, int f) {
  return rmsg_sendmsg(fd, m, f);
}
ssize_t shim_sendfile(int out, int in, off_t* off, size_t n) {
  return rmsg_sendfile(out, in, off, n);
}
ssize_t shim_sendfile64(int out, int in, off64_t* off, size_t n) {
  static_assert(sizeof(off64_t) == sizeof(off_t), "a 64-bit off_t ABI");
  return rmsg_sendfile(out, in, reinterpret_cast<off_t*>(off), n);
}
ssize_t shim_splice(int in, loff_t* in_off, int out, loff_t* out_off, size_t n, unsigned f) {
  return rmsg::posix::splice_counted(in, in_off, out, out_off, n, f);
}

int shim_fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return rmsg_fcntl(fd, cmd, arg);
}
int shim_fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return rmsg_fcntl(fd, cmd, arg);
}
int shim_ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return rmsg_ioctl(fd, request, arg);
}
int shim_getsockopt(int fd, int level, int name, void* v, socklen_t* l) {
  return rmsg_getsockopt(fd, level, name, v, l);
}
int shim_setsockopt(int fd, int level, int name, const void* v, socklen_t l) {
  return rmsg_setsockopt(fd, level, name, v, l);
}
int shim_getsockname(int fd, sockaddr* a, socklen_t* l) {
  return rmsg_getsockname(fd, a, l);
}
int shim_getpeername(int fd, sockaddr* a, socklen_t* l) {
  return rmsg_getpeername(fd, a, l);
}

int shim_poll(pollfd* fds, nfds_t n, int t) {
  return rmsg_poll(fds, n, t);
}
int shim_poll_chk(pollfd* fds, nfds_t n, int t, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return rmsg_poll(fds, n, t);
}
int shim_ppoll(pollfd* fds, nfds_t n, const timespec* t, const sigset_t* m) {
  return rmsg_ppoll(fds, n, t, m);
}
int shim_ppoll_chk(pollfd* fds, nfds_t n, const timespec* t, const sigset_t* m, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __chk_fail();
  return rmsg_ppoll(fds, n, t, m);
}
int shim_select(int n, fd_set* r, fd_set* w, fd_set* e, timeval* t) {
  return rmsg_select(n, r, w, e, t);
}
int shim_pselect(int n, fd_set* r, fd_set* w, fd_set* e, const timespec* t, const sigset_t* m) {
  return rmsg_pselect(n, r, w, e, t, m);
}
int shim_epoll_create(int size) {
  return rmsg_epoll_create(size);
}
int shim_epoll_create1(int flags) {
  return rmsg_epoll_create1(flags);
}
int shim_epoll_ctl(int ep, int op, int fd, epoll_event* e) {
  return rmsg_epoll_ctl(ep, op, fd, e);
}
int shim_epoll_wait(int ep, epoll_event* e, int n, int t) {
  return rmsg_epoll_wait(ep, e, n, t);
}
int shim_epoll_pwait(int ep, epoll_event* e, int n, int t, const sigset_t* m) {
  return rmsg_epoll_pwait(ep, e, n, t, m);
}
