/* rmsg's socket API: the BSD socket calls, with errno semantics, usable from C and C++.
 *
 * Each rmsg_X(...) takes the arguments of the C library's X(...) and answers as it does:
 * the same return values, -1 with errno set on failure, the same blocking behaviour. The
 * preload library (librmsg-preload.so, started by `rmsg-run program`) exports these calls
 * under their plain names so that an unmodified program runs on them; a program that is
 * built against rmsg may call them directly instead. Design and limits: docs/socket-shim.md.
 *
 * Which descriptors rmsg manages: the sockets made by rmsg_socket() with domain AF_INET or
 * AF_INET6 and type SOCK_STREAM (SOCK_NONBLOCK and SOCK_CLOEXEC masked off before the
 * check; protocol 0 or IPPROTO_TCP), the connections rmsg_accept()/rmsg_accept4() take from
 * such a listener, and the descriptors rmsg_dup*()/rmsg_fcntl(F_DUPFD*) make of them. Every
 * other descriptor passes straight to the kernel. A managed TCP connection's descriptor IS
 * the kernel's TCP socket: readiness (poll, select, epoll), options, TCP_INFO, FIONREAD,
 * getsockname and fork are the kernel's, and the shim never adds a byte to the connection.
 *
 * Environment (read once, at the first call or when the preload library loads):
 *   RMSG_PRELOAD=off   every call passes through to the kernel; nothing is tracked.
 *   RMSG_STATS=FILE    one JSON line per connection is appended to FILE when its
 *                      owner (see Processes) closes its last descriptor of it, and at
 *                      exit for those it still holds: {"pid":N,"peer":"ADDR:PORT",
 *                      "transport":"tcp","bytes_in":N,"bytes_out":N,"fallback":"WHY"|null}.
 *
 * Threads and signals: every call may be made from any thread. The data calls (rmsg_read ...
 * rmsg_sendmsg), rmsg_close, rmsg_dup*, rmsg_fcntl, rmsg_poll, rmsg_ppoll and rmsg_select take no
 * lock and allocate nothing, so a signal handler may call them wherever the C library's call would
 * be async-signal-safe, and a longjmp out of a handler leaves nothing held.
 * The layer starts at the first call (the preload library: when it loads), which maps its
 * table and reads the environment: a program using the C API directly must make its first
 * rmsg_ call outside a signal handler.
 *
 * Processes: after fork() both processes hold the connection (the kernel's TCP socket);
 * closing it in one does not break it in the other, and the shim never shuts a connection
 * down on close. The process that created a connection owns it (it writes its stats line);
 * a child that reads or writes an inherited connection takes the ownership over for its
 * copy. vfork() and posix_spawn() children change nothing of the parent's state.
 *
 * Not supported: descriptors received over SCM_RIGHTS or inherited across exec (they pass
 * through untracked), setuid programs (the loader ignores LD_PRELOAD), io_uring.
 */
#ifndef RMSG_SOCKET_H
#define RMSG_SOCKET_H

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* Exported from librmsg; the preload library builds the same code with this empty (hidden). */
#ifndef RMSG_SOCKET_API
#define RMSG_SOCKET_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Lifecycle. */
RMSG_SOCKET_API int rmsg_socket(int domain, int type, int protocol);
RMSG_SOCKET_API int rmsg_bind(int fd, const struct sockaddr* addr, socklen_t len);
RMSG_SOCKET_API int rmsg_listen(int fd, int backlog);
RMSG_SOCKET_API int rmsg_accept(int fd, struct sockaddr* addr, socklen_t* len);
RMSG_SOCKET_API int rmsg_accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags);
RMSG_SOCKET_API int rmsg_connect(int fd, const struct sockaddr* addr, socklen_t len);
RMSG_SOCKET_API int rmsg_shutdown(int fd, int how);
RMSG_SOCKET_API int rmsg_close(int fd);
/* close_range()/closefrom() skip the descriptors rmsg keeps for itself. */
RMSG_SOCKET_API int rmsg_close_range(unsigned int first, unsigned int last, int flags);
RMSG_SOCKET_API void rmsg_closefrom(int lowfd);
RMSG_SOCKET_API int rmsg_dup(int fd);
RMSG_SOCKET_API int rmsg_dup2(int fd, int newfd);
RMSG_SOCKET_API int rmsg_dup3(int fd, int newfd, int flags);

/* Data. MSG_PEEK reads are not counted as bytes in. SIGPIPE and MSG_NOSIGNAL behave as the
 * kernel's: a write to a broken connection raises SIGPIPE unless MSG_NOSIGNAL is given. */
RMSG_SOCKET_API ssize_t rmsg_read(int fd, void* buf, size_t n);
RMSG_SOCKET_API ssize_t rmsg_readv(int fd, const struct iovec* iov, int iovcnt);
RMSG_SOCKET_API ssize_t rmsg_recv(int fd, void* buf, size_t n, int flags);
RMSG_SOCKET_API ssize_t rmsg_recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr,
                                      socklen_t* len);
RMSG_SOCKET_API ssize_t rmsg_recvmsg(int fd, struct msghdr* msg, int flags);
RMSG_SOCKET_API ssize_t rmsg_write(int fd, const void* buf, size_t n);
RMSG_SOCKET_API ssize_t rmsg_writev(int fd, const struct iovec* iov, int iovcnt);
RMSG_SOCKET_API ssize_t rmsg_send(int fd, const void* buf, size_t n, int flags);
RMSG_SOCKET_API ssize_t rmsg_sendto(int fd, const void* buf, size_t n, int flags,
                                    const struct sockaddr* addr, socklen_t len);
RMSG_SOCKET_API ssize_t rmsg_sendmsg(int fd, const struct msghdr* msg, int flags);
RMSG_SOCKET_API ssize_t rmsg_sendfile(int out_fd, int in_fd, off_t* offset, size_t count);

/* Options and descriptor flags. rmsg_fcntl takes fcntl's third argument, when the command
 * has one, as an int or a pointer; rmsg_ioctl takes ioctl's third argument as a pointer. */
RMSG_SOCKET_API int rmsg_fcntl(int fd, int cmd, ...);
RMSG_SOCKET_API int rmsg_ioctl(int fd, unsigned long request, ...);
RMSG_SOCKET_API int rmsg_getsockopt(int fd, int level, int name, void* value, socklen_t* len);
RMSG_SOCKET_API int rmsg_setsockopt(int fd, int level, int name, const void* value, socklen_t len);
RMSG_SOCKET_API int rmsg_getsockname(int fd, struct sockaddr* addr, socklen_t* len);
RMSG_SOCKET_API int rmsg_getpeername(int fd, struct sockaddr* addr, socklen_t* len);

/* Readiness: exactly the kernel's (level, EPOLLET, EPOLLONESHOT, epoll in epoll; POLLOUT
 * only once a non-blocking connect has completed). rmsg_epoll_ctl also records which epoll
 * sets watch which managed descriptor (docs/socket-shim.md: why). */
RMSG_SOCKET_API int rmsg_poll(struct pollfd* fds, nfds_t nfds, int timeout);
RMSG_SOCKET_API int rmsg_ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
                               const sigset_t* mask);
RMSG_SOCKET_API int rmsg_select(int nfds, fd_set* r, fd_set* w, fd_set* e, struct timeval* t);
RMSG_SOCKET_API int rmsg_pselect(int nfds, fd_set* r, fd_set* w, fd_set* e,
                                 const struct timespec* t, const sigset_t* mask);
RMSG_SOCKET_API int rmsg_epoll_create(int size);
RMSG_SOCKET_API int rmsg_epoll_create1(int flags);
RMSG_SOCKET_API int rmsg_epoll_ctl(int epfd, int op, int fd, struct epoll_event* event);
RMSG_SOCKET_API int rmsg_epoll_wait(int epfd, struct epoll_event* events, int max, int timeout);
RMSG_SOCKET_API int rmsg_epoll_pwait(int epfd, struct epoll_event* events, int max, int timeout,
                                     const sigset_t* mask);

/* 1 when rmsg manages fd (see above), 0 otherwise. */
RMSG_SOCKET_API int rmsg_is_managed(int fd);

#ifdef __cplusplus
}
#endif

#endif /* RMSG_SOCKET_H */
