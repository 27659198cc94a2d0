// What the kernel answers about a TCP socket is answered as for one: socket options,
// names, TCP_INFO, FIONREAD/FIONBIO, fcntl flags. Built with _FILE_OFFSET_BITS=64, so
// fcntl() here is fcntl64, as in most Debian programs.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>

#include "posix/probe_scenarios.h"
#include "posix/probe_util.h"

namespace probe {
namespace {

int get_int(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  PROBE_CHECK(getsockopt(fd, level, name, &v, &len) == 0 && len == sizeof v);
  return v;
}

void set_int(int fd, int level, int name, int v) {
  PROBE_CHECK(setsockopt(fd, level, name, &v, sizeof v) == 0);
}

void check_identity(const Pair& p, int family) {
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_DOMAIN) == family);
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_TYPE) == SOCK_STREAM);
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_TCP);
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_ERROR) == 0);
  sockaddr_storage name{}, peer{};
  socklen_t nl = sizeof name, pl = sizeof peer;
  PROBE_CHECK(getsockname(p.b, reinterpret_cast<sockaddr*>(&name), &nl) == 0);
  PROBE_CHECK(getpeername(p.a, reinterpret_cast<sockaddr*>(&peer), &pl) == 0);
  PROBE_CHECK(nl == pl && std::memcmp(&name, &peer, nl) == 0);
  tcp_info ti{};
  socklen_t tl = sizeof ti;
  PROBE_CHECK(getsockopt(p.a, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0);
  PROBE_CHECK(ti.tcpi_state == TCP_ESTABLISHED);
}

}  // namespace

void options() {
  Pair p = pair();
  check_identity(p, AF_INET);
  Pair q = pair(AF_INET6);
  check_identity(q, AF_INET6);

  // FIONREAD counts what is queued; FIONBIO and O_NONBLOCK are the same flag.
  PROBE_CHECK(write(p.a, "12345", 5) == 5);
  int queued = 0;
  for (int i = 0; i < 1000 && queued < 5; ++i) PROBE_CHECK(ioctl(p.b, FIONREAD, &queued) == 0);
  PROBE_CHECK(queued == 5);
  int on = 1;
  PROBE_CHECK(ioctl(p.b, FIONBIO, &on) == 0);
  PROBE_CHECK((fcntl(p.b, F_GETFL) & O_NONBLOCK) != 0);
  char buf[8];
  read_exactly(p.b, buf, 5);
  PROBE_CHECK(read(p.b, buf, sizeof buf) == -1 && errno == EAGAIN);
  int off = 0;
  PROBE_CHECK(ioctl(p.b, FIONBIO, &off) == 0);
  PROBE_CHECK((fcntl(p.b, F_GETFL) & O_NONBLOCK) == 0);
  PROBE_CHECK(fcntl(p.a, F_SETFL, fcntl(p.a, F_GETFL) | O_NONBLOCK) == 0);
  PROBE_CHECK((fcntl(p.a, F_GETFL) & O_NONBLOCK) != 0);
  PROBE_CHECK(fcntl(p.a, F_SETFL, fcntl(p.a, F_GETFL) & ~O_NONBLOCK) == 0);
  PROBE_CHECK(fcntl(p.a, F_GETFD) == 0);  // connect_to made it without SOCK_CLOEXEC
  PROBE_CHECK(fcntl(p.a, F_SETFD, FD_CLOEXEC) == 0 && fcntl(p.a, F_GETFD) == FD_CLOEXEC);

  // The option list of issue 19: each set is read back.
  set_int(p.a, IPPROTO_TCP, TCP_NODELAY, 1);
  PROBE_CHECK(get_int(p.a, IPPROTO_TCP, TCP_NODELAY) == 1);
  set_int(p.a, IPPROTO_TCP, TCP_CORK, 1);
  PROBE_CHECK(get_int(p.a, IPPROTO_TCP, TCP_CORK) == 1);
  set_int(p.a, IPPROTO_TCP, TCP_CORK, 0);
  set_int(p.a, SOL_SOCKET, SO_KEEPALIVE, 1);
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_KEEPALIVE) == 1);
  set_int(p.a, IPPROTO_TCP, TCP_KEEPIDLE, 30);
  set_int(p.a, IPPROTO_TCP, TCP_KEEPINTVL, 5);
  set_int(p.a, IPPROTO_TCP, TCP_KEEPCNT, 3);
  PROBE_CHECK(get_int(p.a, IPPROTO_TCP, TCP_KEEPIDLE) == 30);
  PROBE_CHECK(get_int(p.a, IPPROTO_TCP, TCP_KEEPINTVL) == 5);
  PROBE_CHECK(get_int(p.a, IPPROTO_TCP, TCP_KEEPCNT) == 3);
  set_int(p.a, SOL_SOCKET, SO_REUSEADDR, 1);
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_REUSEADDR) == 1);
  set_int(p.a, SOL_SOCKET, SO_REUSEPORT, 1);
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_REUSEPORT) == 1);
  set_int(p.a, SOL_SOCKET, SO_SNDBUF, 65536);
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_SNDBUF) >= 65536);
  set_int(p.a, SOL_SOCKET, SO_RCVBUF, 65536);
  PROBE_CHECK(get_int(p.a, SOL_SOCKET, SO_RCVBUF) >= 65536);
  linger lg{1, 7}, lg_back{};
  socklen_t ll = sizeof lg_back;
  PROBE_CHECK(setsockopt(p.a, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
  PROBE_CHECK(getsockopt(p.a, SOL_SOCKET, SO_LINGER, &lg_back, &ll) == 0);
  PROBE_CHECK(lg_back.l_onoff == 1 && lg_back.l_linger == 7);
  lg.l_onoff = 0;
  PROBE_CHECK(setsockopt(p.a, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
  timeval tv{0, 50000}, tv_back{};
  socklen_t tvl = sizeof tv_back;
  PROBE_CHECK(setsockopt(p.b, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
  PROBE_CHECK(getsockopt(p.b, SOL_SOCKET, SO_RCVTIMEO, &tv_back, &tvl) == 0);
  PROBE_CHECK(tv_back.tv_sec == 0 && tv_back.tv_usec > 0);
  PROBE_CHECK(read(p.b, buf, sizeof buf) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
  PROBE_CHECK(setsockopt(p.b, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0);
  int v6 = socket(AF_INET6, SOCK_STREAM, 0);
  PROBE_CHECK(v6 >= 0);
  set_int(v6, IPPROTO_IPV6, IPV6_V6ONLY, 1);
  PROBE_CHECK(get_int(v6, IPPROTO_IPV6, IPV6_V6ONLY) == 1);
  close(v6);

  // fcntl(F_DUPFD) makes another number for the same connection.
  int d = fcntl(p.a, F_DUPFD_CLOEXEC, 50);
  PROBE_CHECK(d >= 50);
  PROBE_CHECK(write(d, "67", 2) == 2);
  close(p.a);
  PROBE_CHECK(write(d, "8", 1) == 1);
  read_exactly(p.b, buf, 3);
  PROBE_CHECK(std::memcmp(buf, "678", 3) == 0);
  close(d);
  close(p.b);
  close(q.a);
  close(q.b);
  expect_line(getpid(), 0, 8);
  expect_line(getpid(), 8, 0);
  expect_count(4);
}

}  // namespace probe
