// The preload probe's helpers. The probe (posix_probe) is a plain program that uses only
// the C library's socket calls and never links rmsg: the tests run each of its scenarios
// once under librmsg-preload.so and once without, and both runs must see the kernel's
// answers. A failed check prints where and why and ends the scenario with status 1.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define PROBE_CHECK(cond)                                                                         \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::fprintf(stderr, "%s:%d: check failed: %s (errno %d: %s)\n", __FILE__, __LINE__, #cond, \
                   errno, std::strerror(errno));                                                  \
      std::_Exit(1);                                                                              \
    }                                                                                             \
  } while (0)

namespace probe {

// A connected loopback pair made through a listener (which is closed again): a is the
// connecting side, b the accepted one.
struct Pair {
  int a = -1;
  int b = -1;
};

inline int listener(int backlog = 16, int family = AF_INET) {
  int l = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  PROBE_CHECK(l >= 0);
  int one = 1;
  PROBE_CHECK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    PROBE_CHECK(bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    PROBE_CHECK(bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  PROBE_CHECK(listen(l, backlog) == 0);
  return l;
}

inline sockaddr_storage address_of(int l, socklen_t* len) {
  sockaddr_storage a{};
  *len = sizeof a;
  PROBE_CHECK(getsockname(l, reinterpret_cast<sockaddr*>(&a), len) == 0);
  return a;
}

inline int connect_to(int l, int type_flags = 0) {
  socklen_t len = 0;
  sockaddr_storage a = address_of(l, &len);
  int c = socket(a.ss_family, SOCK_STREAM | type_flags, 0);
  PROBE_CHECK(c >= 0);
  int rc = connect(c, reinterpret_cast<sockaddr*>(&a), len);
  PROBE_CHECK(rc == 0 || (rc < 0 && errno == EINPROGRESS && (type_flags & SOCK_NONBLOCK)));
  return c;
}

inline Pair pair(int family = AF_INET) {
  int l = listener(16, family);
  Pair p;
  p.a = connect_to(l);
  p.b = accept(l, nullptr, nullptr);
  PROBE_CHECK(p.b >= 0);
  PROBE_CHECK(close(l) == 0);
  return p;
}

inline void write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    PROBE_CHECK(w > 0);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

inline void read_exactly(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    PROBE_CHECK(r > 0);
    p += r;
    n -= static_cast<size_t>(r);
  }
}

}  // namespace probe
