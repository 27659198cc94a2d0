// The _FORTIFY_SOURCE entry points fail as glibc's checks require (the process aborts),
// with and without the shim. Built without _FORTIFY_SOURCE, so nothing here is rewritten.
#include <poll.h>
#include <signal.h>

#include "posix/probe_scenarios.h"
#include "posix/probe_util.h"

extern "C" {
ssize_t __read_chk(int fd, void* buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, sockaddr* addr,
                       socklen_t* len);
int __poll_chk(pollfd* fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(pollfd* fds, nfds_t nfds, const timespec* timeout, const sigset_t* ss,
                size_t fdslen);
}

namespace probe {
namespace {

// A connection with one byte waiting: a checked call that passes reads it.
Pair ready_pair() {
  Pair p = pair();
  PROBE_CHECK(write(p.a, "ab", 2) == 2);
  return p;
}

}  // namespace

void fortify_read() {
  Pair p = ready_pair();
  char buf[4];
  PROBE_CHECK(__read_chk(p.b, buf, 1, sizeof buf) == 1);  // within bounds: a read
  __read_chk(p.b, buf, 8, sizeof buf);                    // overflow: aborts
  std::fprintf(stderr, "__read_chk returned after an overflow\n");
}

void fortify_recv() {
  Pair p = ready_pair();
  char buf[4];
  PROBE_CHECK(__recv_chk(p.b, buf, 1, sizeof buf, 0) == 1);
  __recv_chk(p.b, buf, 8, sizeof buf, 0);
  std::fprintf(stderr, "__recv_chk returned after an overflow\n");
}

void fortify_recvfrom() {
  Pair p = ready_pair();
  char buf[4];
  PROBE_CHECK(__recvfrom_chk(p.b, buf, 1, sizeof buf, 0, nullptr, nullptr) == 1);
  __recvfrom_chk(p.b, buf, 8, sizeof buf, 0, nullptr, nullptr);
  std::fprintf(stderr, "__recvfrom_chk returned after an overflow\n");
}

void fortify_poll() {
  Pair p = ready_pair();
  pollfd fds[1] = {{p.b, POLLIN, 0}};
  PROBE_CHECK(__poll_chk(fds, 1, 0, sizeof fds) == 1);
  __poll_chk(fds, 2, 0, sizeof fds);
  std::fprintf(stderr, "__poll_chk returned after an overflow\n");
}

void fortify_ppoll() {
  Pair p = ready_pair();
  pollfd fds[1] = {{p.b, POLLIN, 0}};
  timespec zero{0, 0};
  PROBE_CHECK(__ppoll_chk(fds, 1, &zero, nullptr, sizeof fds) == 1);
  __ppoll_chk(fds, 2, &zero, nullptr, sizeof fds);
  std::fprintf(stderr, "__ppoll_chk returned after an overflow\n");
}

}  // namespace probe
