// Data calls: every read and write variant carries the bytes exactly (the shim adds and
// drops nothing) and is counted; MSG_PEEK is not counted; SIGPIPE is the kernel's.
// Built with _FORTIFY_SOURCE=2, so read()/recv() here become __read_chk/__recv_chk.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "posix/probe_scenarios.h"
#include "posix/probe_util.h"

namespace probe {
namespace {

char byte_at(size_t i) {
  return static_cast<char>('a' + i % 26);
}

void fill(char* p, size_t n, size_t from) {
  for (size_t i = 0; i < n; ++i) p[i] = byte_at(from + i);
}

void check(const char* p, size_t n, size_t from) {
  for (size_t i = 0; i < n; ++i) PROBE_CHECK(p[i] == byte_at(from + i));
}

volatile sig_atomic_t g_sigpipes = 0;
void on_sigpipe(int) {
  g_sigpipes = g_sigpipes + 1;
}

}  // namespace

void echo() {
  Pair p = pair();
  char out[30];
  fill(out, sizeof out, 0);
  // 30 bytes out through five different calls.
  PROBE_CHECK(write(p.a, out, 11) == 11);
  PROBE_CHECK(send(p.a, out + 11, 7, 0) == 7);
  iovec v[2] = {{out + 18, 2}, {out + 20, 3}};
  PROBE_CHECK(writev(p.a, v, 2) == 5);
  msghdr m{};
  iovec mv{out + 23, 3};
  m.msg_iov = &mv;
  m.msg_iovlen = 1;
  PROBE_CHECK(sendmsg(p.a, &m, 0) == 3);
  PROBE_CHECK(send(p.a, out + 26, 2, MSG_MORE) == 2);  // corked until the next send
  PROBE_CHECK(sendto(p.a, out + 28, 2, 0, nullptr, 0) == 2);

  char in[64];
  PROBE_CHECK(recv(p.b, in, 4, MSG_PEEK | MSG_WAITALL) == 4);  // not counted
  check(in, 4, 0);
  PROBE_CHECK(recv(p.b, in, 11, MSG_WAITALL) == 11);
  check(in, 11, 0);
  size_t got = 0;
  while (got < 7) {
    iovec rv{in + got, 7 - got};
    ssize_t r = readv(p.b, &rv, 1);
    PROBE_CHECK(r > 0);
    got += static_cast<size_t>(r);
  }
  check(in, 7, 11);
  msghdr rm{};
  iovec rmv{in, 5};
  rm.msg_iov = &rmv;
  rm.msg_iovlen = 1;
  PROBE_CHECK(recvmsg(p.b, &rm, MSG_WAITALL) == 5);
  check(in, 5, 18);
  PROBE_CHECK(recvfrom(p.b, in, 3, MSG_WAITALL, nullptr, nullptr) == 3);
  check(in, 3, 23);
  read_exactly(p.b, in, 4);
  check(in, 4, 26);
  PROBE_CHECK(recv(p.b, in, sizeof in, MSG_DONTWAIT) == -1 && errno == EAGAIN);

  // 100 bytes back with sendfile from a file.
  char path[] = "/tmp/rmsg-probe-XXXXXX";
  int f = mkstemp(path);
  PROBE_CHECK(f >= 0);
  unlink(path);
  char file[100];
  fill(file, sizeof file, 5);
  write_all(f, file, sizeof file);
  off_t off = 0;
  size_t sent = 0;
  while (sent < sizeof file) {
    ssize_t s = sendfile(p.b, f, &off, sizeof file - sent);
    PROBE_CHECK(s > 0);
    sent += static_cast<size_t>(s);
  }
  close(f);
  char back[100];
  read_exactly(p.a, back, sizeof back);
  check(back, sizeof back, 5);
  PROBE_CHECK(close(p.a) == 0);
  PROBE_CHECK(read(p.b, in, sizeof in) == 0);  // EOF
  PROBE_CHECK(close(p.b) == 0);
  expect_line(getpid(), 100, 30);
  expect_line(getpid(), 30, 100);
  expect_count(2);
}

void sigpipe() {
  struct sigaction sa {};
  sa.sa_handler = on_sigpipe;
  PROBE_CHECK(sigaction(SIGPIPE, &sa, nullptr) == 0);
  Pair p = pair();
  linger lg{1, 0};  // the peer resets at once
  PROBE_CHECK(setsockopt(p.b, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
  PROBE_CHECK(close(p.b) == 0);
  std::uint64_t written = 0;
  int epipes = 0;
  for (int i = 0; i < 100 && epipes == 0; ++i) {
    ssize_t w = write(p.a, "x", 1);
    if (w == 1) {
      ++written;
    } else {
      PROBE_CHECK(errno == EPIPE || errno == ECONNRESET);
      if (errno == EPIPE) ++epipes;
    }
  }
  PROBE_CHECK(epipes == 1);
  PROBE_CHECK(g_sigpipes == 1);  // the kernel raised it with the EPIPE
  PROBE_CHECK(send(p.a, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE);
  PROBE_CHECK(g_sigpipes == 1);  // MSG_NOSIGNAL: none
  PROBE_CHECK(close(p.a) == 0);
  expect_line(getpid(), 0, written);
  expect_line(getpid(), 0, 0);
  expect_count(2);
}

void non_tcp() {
  // AF_UNIX and UDP pass through untracked: only the TCP pair below gets stats lines.
  int sp[2];
  PROBE_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
  PROBE_CHECK(write(sp[0], "hello", 5) == 5);
  char buf[8];
  PROBE_CHECK(read(sp[1], buf, sizeof buf) == 5);
  close(sp[0]);
  close(sp[1]);
  int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  PROBE_CHECK(u >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  PROBE_CHECK(bind(u, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  PROBE_CHECK(getsockname(u, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  PROBE_CHECK(sendto(u, "ping", 4, 0, reinterpret_cast<sockaddr*>(&a), len) == 4);
  PROBE_CHECK(recv(u, buf, sizeof buf, 0) == 4);
  close(u);
  // SOCK_NONBLOCK | SOCK_CLOEXEC are masked off before the type check: this one is TCP.
  int l = listener();
  int c = connect_to(l, SOCK_NONBLOCK | SOCK_CLOEXEC);
  int s = accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  PROBE_CHECK(s >= 0);
  pollfd pfd{c, POLLOUT, 0};
  PROBE_CHECK(poll(&pfd, 1, 5000) == 1);
  PROBE_CHECK(write(c, "abc", 3) == 3);
  read_exactly(s, buf, 3);
  close(c);
  close(s);
  close(l);
  expect_line(getpid(), 0, 3);
  expect_line(getpid(), 3, 0);
  expect_count(2);
}

}  // namespace probe
