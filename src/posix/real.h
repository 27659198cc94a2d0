// The C library's own socket and descriptor calls, found with dlsym(RTLD_NEXT) so that the
// shim reaches them past its own interposed names (the preload library) or past nothing
// (the C API linked into a program), each at its first use.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

namespace rmsg::posix {

// X(name, return type, parameter list)
#define RMSG_POSIX_REAL_CALLS(X)                                                      \
  X(socket, int, (int, int, int))                                                     \
  X(bind, int, (int, const sockaddr*, socklen_t))                                     \
  X(listen, int, (int, int))                                                          \
  X(accept, int, (int, sockaddr*, socklen_t*))                                        \
  X(accept4, int, (int, sockaddr*, socklen_t*, int))                                  \
  X(connect, int, (int, const sockaddr*, socklen_t))                                  \
  X(shutdown, int, (int, int))                                                        \
  X(close, int, (int))                                                                \
  X(close_range, int, (unsigned int, unsigned int, int))                              \
  X(dup, int, (int))                                                                  \
  X(dup2, int, (int, int))                                                            \
  X(dup3, int, (int, int, int))                                                       \
  X(read, ssize_t, (int, void*, size_t))                                              \
  X(readv, ssize_t, (int, const iovec*, int))                                         \
  X(recv, ssize_t, (int, void*, size_t, int))                                         \
  X(recvfrom, ssize_t, (int, void*, size_t, int, sockaddr*, socklen_t*))              \
  X(recvmsg, ssize_t, (int, msghdr*, int))                                            \
  X(write, ssize_t, (int, const void*, size_t))                                       \
  X(writev, ssize_t, (int, const iovec*, int))                                        \
  X(send, ssize_t, (int, const void*, size_t, int))                                   \
  X(sendto, ssize_t, (int, const void*, size_t, int, const sockaddr*, socklen_t))     \
  X(sendmsg, ssize_t, (int, const msghdr*, int))                                      \
  X(sendfile, ssize_t, (int, int, off_t*, size_t))                                    \
  X(splice, ssize_t, (int, loff_t*, int, loff_t*, size_t, unsigned))                  \
  X(fcntl, int, (int, int, ...))                                                      \
  X(ioctl, int, (int, unsigned long, ...))                                            \
  X(getsockopt, int, (int, int, int, void*, socklen_t*))                              \
  X(setsockopt, int, (int, int, int, const void*, socklen_t))                         \
  X(getsockname, int, (int, sockaddr*, socklen_t*))                                   \
  X(getpeername, int, (int, sockaddr*, socklen_t*))                                   \
  X(poll, int, (pollfd*, nfds_t, int))                                                \
  X(ppoll, int, (pollfd*, nfds_t, const timespec*, const sigset_t*))                  \
  X(select, int, (int, fd_set*, fd_set*, fd_set*, timeval*))                          \
  X(pselect, int, (int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*)) \
  X(epoll_create, int, (int))                                                         \
  X(epoll_create1, int, (int))                                                        \
  X(epoll_ctl, int, (int, int, int, epoll_event*))                                    \
  X(epoll_wait, int, (int, epoll_event*, int, int))                                   \
  X(epoll_pwait, int, (int, epoll_event*, int, int, const sigset_t*))

struct RealCalls {
#define RMSG_POSIX_REAL_MEMBER(name, ret, params) ret(*name) params = nullptr;
  RMSG_POSIX_REAL_CALLS(RMSG_POSIX_REAL_MEMBER)
#undef RMSG_POSIX_REAL_MEMBER
};

// Each pointer starts at a stub that finds the C library's call (dlsym(RTLD_NEXT)) at its
// first use, stores it here and makes the call: start-up resolves nothing, and a program
// pays for the calls it makes. A call made while its thread is inside dlsym() gets the raw
// system call of the same meaning (real.cc). The pointers change once each, to the same
// value whichever thread gets there first; reading one is a plain load.
extern RealCalls g_real;

// Resolves every call not resolved yet. The shim calls it when it starts tracking (its
// table is mapped): from then on no call of the shim's runs dlsym(), which is not
// async-signal-safe, so a signal handler may close a managed socket. Before that, a
// pass-through call's first use (in a handler, say) does run it.
void resolve_real_calls();

}  // namespace rmsg::posix
