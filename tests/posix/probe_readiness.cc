// Readiness as the program's own poll/ppoll/select/pselect/epoll_wait/epoll_pwait see it:
// level, EPOLLET, EPOLLONESHOT, an epoll set in another, a waiter asleep when data comes,
// POLLOUT held back until a non-blocking connect completes.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>

#include <atomic>

#include "posix/probe_scenarios.h"
#include "posix/probe_util.h"

namespace probe {
namespace {

short poll_one(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int n = poll(&p, 1, timeout_ms);
  PROBE_CHECK(n == 0 || n == 1);
  return n == 0 ? 0 : p.revents;
}

short ppoll_one(int fd, short events, long timeout_ms) {
  pollfd p{fd, events, 0};
  timespec t{timeout_ms / 1000, (timeout_ms % 1000) * 1000000};
  sigset_t none;
  sigemptyset(&none);
  int n = ppoll(&p, 1, &t, &none);
  PROBE_CHECK(n == 0 || n == 1);
  return n == 0 ? 0 : p.revents;
}

bool select_readable(int fd, long timeout_ms) {
  fd_set r;
  FD_ZERO(&r);
  FD_SET(fd, &r);
  timeval t{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  int n = select(fd + 1, &r, nullptr, nullptr, &t);
  PROBE_CHECK(n == 0 || n == 1);
  return n == 1 && FD_ISSET(fd, &r);
}

bool pselect_writable(int fd, long timeout_ms) {
  fd_set w;
  FD_ZERO(&w);
  FD_SET(fd, &w);
  timespec t{timeout_ms / 1000, (timeout_ms % 1000) * 1000000};
  int n = pselect(fd + 1, nullptr, &w, nullptr, &t, nullptr);
  PROBE_CHECK(n == 0 || n == 1);
  return n == 1 && FD_ISSET(fd, &w);
}

int epoll_with(int fd, std::uint32_t events, std::uint64_t data) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  PROBE_CHECK(ep >= 0);
  epoll_event e{};
  e.events = events;
  e.data.u64 = data;
  PROBE_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) == 0);
  return ep;
}

// The number of events (0 or 1 expected) and, in *data, the first one's data.
int wait_one(int ep, int timeout_ms, std::uint64_t* data = nullptr) {
  epoll_event e[4];
  int n = epoll_wait(ep, e, 4, timeout_ms);
  PROBE_CHECK(n >= 0 && n <= 1);
  if (n == 1 && data != nullptr) *data = e[0].data.u64;
  return n;
}

void drain(int fd, size_t n) {
  char buf[64];
  read_exactly(fd, buf, n);
}

}  // namespace

void poll_level() {
  Pair p = pair();
  PROBE_CHECK(poll_one(p.b, POLLIN, 0) == 0);
  PROBE_CHECK(!select_readable(p.b, 0));
  PROBE_CHECK(poll_one(p.a, POLLOUT, 0) == POLLOUT);
  PROBE_CHECK(pselect_writable(p.a, 0));
  PROBE_CHECK(write(p.a, "x", 1) == 1);
  PROBE_CHECK(poll_one(p.b, POLLIN, 5000) == POLLIN);
  // Level: still readable while unread, through every call.
  PROBE_CHECK(poll_one(p.b, POLLIN, 0) == POLLIN);
  PROBE_CHECK(ppoll_one(p.b, POLLIN, 0) == POLLIN);
  PROBE_CHECK(select_readable(p.b, 0));
  drain(p.b, 1);
  PROBE_CHECK(poll_one(p.b, POLLIN, 0) == 0);
  PROBE_CHECK(ppoll_one(p.b, POLLIN, 0) == 0);
  // The peer's close: readable with POLLRDHUP, and read() is 0.
  PROBE_CHECK(close(p.a) == 0);
  PROBE_CHECK(poll_one(p.b, POLLIN | POLLRDHUP, 5000) == (POLLIN | POLLRDHUP));
  char c;
  PROBE_CHECK(read(p.b, &c, 1) == 0);
  PROBE_CHECK(close(p.b) == 0);
}

void epoll_level() {
  Pair p = pair();
  int ep = epoll_with(p.b, EPOLLIN, 42);
  PROBE_CHECK(wait_one(ep, 0) == 0);
  PROBE_CHECK(write(p.a, "xy", 2) == 2);
  std::uint64_t data = 0;
  PROBE_CHECK(wait_one(ep, 5000, &data) == 1 && data == 42);
  PROBE_CHECK(wait_one(ep, 0) == 1);  // level: again, while unread
  drain(p.b, 1);
  PROBE_CHECK(wait_one(ep, 0) == 1);  // one byte still unread
  drain(p.b, 1);
  PROBE_CHECK(wait_one(ep, 0) == 0);
  close(ep);
  close(p.a);
  close(p.b);
}

void epoll_edge() {
  Pair p = pair();
  int ep = epoll_with(p.b, EPOLLIN | EPOLLET, 7);
  PROBE_CHECK(write(p.a, "x", 1) == 1);
  PROBE_CHECK(wait_one(ep, 5000) == 1);
  PROBE_CHECK(wait_one(ep, 0) == 0);  // no new edge though the byte is unread
  PROBE_CHECK(write(p.a, "y", 1) == 1);
  epoll_event e[2];
  sigset_t none;
  sigemptyset(&none);
  PROBE_CHECK(epoll_pwait(ep, e, 2, 5000, &none) == 1 && e[0].data.u64 == 7);
  PROBE_CHECK(epoll_pwait(ep, e, 2, 0, &none) == 0);
  drain(p.b, 2);
  close(ep);
  close(p.a);
  close(p.b);
}

void epoll_oneshot() {
  Pair p = pair();
  int ep = epoll_with(p.b, EPOLLIN | EPOLLONESHOT, 9);
  PROBE_CHECK(write(p.a, "x", 1) == 1);
  PROBE_CHECK(wait_one(ep, 5000) == 1);
  PROBE_CHECK(write(p.a, "y", 1) == 1);
  PROBE_CHECK(wait_one(ep, 0) == 0);  // disarmed until re-armed
  epoll_event e{};
  e.events = EPOLLIN | EPOLLONESHOT;
  e.data.u64 = 10;
  PROBE_CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, p.b, &e) == 0);
  std::uint64_t data = 0;
  PROBE_CHECK(wait_one(ep, 5000, &data) == 1 && data == 10);
  PROBE_CHECK(wait_one(ep, 0) == 0);
  drain(p.b, 2);
  close(ep);
  close(p.a);
  close(p.b);
}

void epoll_nested() {
  Pair p = pair();
  int inner = epoll_with(p.b, EPOLLIN, 1);
  int outer = epoll_with(inner, EPOLLIN, 2);
  PROBE_CHECK(wait_one(outer, 0) == 0);
  PROBE_CHECK(write(p.a, "x", 1) == 1);
  std::uint64_t data = 0;
  PROBE_CHECK(wait_one(outer, 5000, &data) == 1 && data == 2);
  PROBE_CHECK(wait_one(inner, 0, &data) == 1 && data == 1);
  drain(p.b, 1);
  PROBE_CHECK(wait_one(outer, 0) == 0);
  close(outer);
  close(inner);
  close(p.a);
  close(p.b);
}

namespace {

struct Sleeper {
  int ep = -1;
  std::atomic<long> tid{0};
  int events = -1;
};

void* sleep_in_epoll(void* arg) {
  auto* s = static_cast<Sleeper*>(arg);
  s->tid.store(syscall(SYS_gettid));
  epoll_event e[2];
  s->events = epoll_wait(s->ep, e, 2, 20000);
  return nullptr;
}

// True once the thread is asleep in the kernel (state S in /proc).
bool asleep(long tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char line[512] = "";
  bool s = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  const char* end = s ? std::strrchr(line, ')') : nullptr;
  return end != nullptr && end[1] == ' ' && end[2] == 'S';
}

}  // namespace

void epoll_asleep() {
  Pair p = pair();
  Sleeper s;
  s.ep = epoll_with(p.b, EPOLLIN | EPOLLET, 3);
  pthread_t t;
  PROBE_CHECK(pthread_create(&t, nullptr, sleep_in_epoll, &s) == 0);
  // Wait (bounded) until the thread sleeps in epoll_wait, then wake it with data.
  timespec tick{0, 1000000};
  int tries = 0;
  while ((s.tid.load() == 0 || !asleep(s.tid.load())) && tries++ < 10000) {
    nanosleep(&tick, nullptr);
  }
  PROBE_CHECK(tries < 10000);
  PROBE_CHECK(write(p.a, "x", 1) == 1);
  PROBE_CHECK(pthread_join(t, nullptr) == 0);
  PROBE_CHECK(s.events == 1);
  drain(p.b, 1);
  close(s.ep);
  close(p.a);
  close(p.b);
}

void connect_pending() {
  // A listener whose accept queue is full drops a SYN: the second connect stays pending
  // until the first is accepted and the SYN is retransmitted (about a second).
  int l = listener(0);
  int first = connect_to(l);
  PROBE_CHECK(poll_one(l, POLLIN, 5000) == POLLIN);  // queued: the queue is full now
  int c = connect_to(l, SOCK_NONBLOCK);
  PROBE_CHECK(poll_one(c, POLLOUT, 200) == 0);  // held back: not connected yet
  int ep = epoll_with(c, EPOLLOUT | EPOLLET, 5);
  PROBE_CHECK(wait_one(ep, 0) == 0);
  int err = -1;
  socklen_t len = sizeof err;
  PROBE_CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0);
  int s1 = accept(l, nullptr, nullptr);  // room in the queue again
  PROBE_CHECK(s1 >= 0);
  std::uint64_t data = 0;
  PROBE_CHECK(wait_one(ep, 10000, &data) == 1 && data == 5);
  PROBE_CHECK((poll_one(c, POLLOUT, 0) & POLLOUT) != 0);
  PROBE_CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0);
  int s2 = accept(l, nullptr, nullptr);
  PROBE_CHECK(s2 >= 0);
  PROBE_CHECK(write(c, "ok", 2) == 2);
  drain(s2, 2);
  close(ep);
  close(s1);
  close(s2);
  close(first);
  close(c);
  close(l);
  expect_line(getpid(), 0, 2);
  expect_line(getpid(), 2, 0);
  expect_count(4);
}

void connect_refused() {
  // A port that is bound but not listening refuses: POLLOUT|POLLERR and SO_ERROR.
  int reserved = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  PROBE_CHECK(bind(reserved, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  PROBE_CHECK(getsockname(reserved, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int rc = connect(c, reinterpret_cast<sockaddr*>(&a), len);
  PROBE_CHECK(rc == -1 && (errno == EINPROGRESS || errno == ECONNREFUSED));
  if (errno == EINPROGRESS) {
    short r = poll_one(c, POLLOUT, 5000);
    PROBE_CHECK((r & POLLOUT) != 0 && (r & POLLERR) != 0);
    int err = 0;
    socklen_t el = sizeof err;
    PROBE_CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == ECONNREFUSED);
    PROBE_CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);  // cleared
  }
  close(c);
  close(reserved);
  expect_count(0);  // never connected: no line, as for a refused blocking connect
}

}  // namespace probe
