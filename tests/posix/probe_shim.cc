// The shim's own edges, as a program meets them: closefrom() before any socket, the stats
// descriptor (its number, a program closing or dup2()ing over it, a raw close behind the
// shim's back), bad pointers, a _Fork() child, CLOSE_RANGE_UNSHARE in a thread, and bytes
// moved by splice() and sendfile(). Each runs plain, under the shim with and without
// RMSG_STATS, and switched off (preload_test.cc); only the run with RMSG_STATS has a stats
// descriptor to find.
#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <climits>
#include <cstdlib>

#include "posix/probe_scenarios.h"
#include "posix/probe_util.h"

namespace probe {
namespace {

// The descriptor this process holds on RMSG_STATS's file (the shim's own), or -1: found
// the way a program finds its descriptors, through /proc/self/fd, whatever its number.
int find_stats_descriptor() {
  const char* path = std::getenv("RMSG_STATS");
  char want[4096];
  if (path == nullptr || realpath(path, want) == nullptr) return -1;
  DIR* d = opendir("/proc/self/fd");
  PROBE_CHECK(d != nullptr);
  int found = -1;
  while (dirent* e = readdir(d)) {
    int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dirfd(d)) continue;
    char link[64], target[4096];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::strcmp(target, want) == 0) found = fd;
  }
  closedir(d);
  return found;
}

void wait_ok(pid_t child) {
  int status = 0;
  PROBE_CHECK(waitpid(child, &status, 0) == child);
  PROBE_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

void round_trip(const Pair& p, size_t n) {
  char buf[64];
  std::memset(buf, 'r', sizeof buf);
  write_all(p.a, buf, n);
  read_exactly(p.b, buf, n);
}

void expect_pair(std::uint64_t n) {
  expect_line(getpid(), 0, n);
  expect_line(getpid(), n, 0);
}

}  // namespace

void closefrom_early() {
  // Daemons close everything first thing, before any socket: each call must return (the
  // alarm ends a hang with SIGALRM, which fails the run).
  alarm(10);
  closefrom(3);
  PROBE_CHECK(close_range(3, ~0U, 0) == 0);
  PROBE_CHECK(close_range(5, INT_MAX, 0) == 0);
  PROBE_CHECK(close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0);
  alarm(0);
  Pair p = pair();
  round_trip(p, 4);
  close(p.a);
  close(p.b);
  expect_pair(4);
  expect_count(2);
}

void stats_descriptor_guarded() {
  // The stats descriptor is high (never 0-2) and close-on-exec; a program that closes it or
  // dup2()s over it gets the kernel's answer, and the shim keeps its file under another
  // number: the lines written afterwards prove it.
  int s = find_stats_descriptor();
  Pair p = pair();
  if (s >= 0) {
    PROBE_CHECK(s > 2);
    PROBE_CHECK(fcntl(s, F_GETFD) == FD_CLOEXEC);
    PROBE_CHECK(close(s) == 0);
    PROBE_CHECK(fcntl(s, F_GETFD) == -1 && errno == EBADF);
    int moved = find_stats_descriptor();
    PROBE_CHECK(moved > 2 && moved != s);
    PROBE_CHECK(dup2(p.a, moved) == moved);
    PROBE_CHECK(write(moved, "abc", 3) == 3);  // the program's now: p's connection
    PROBE_CHECK(close(moved) == 0);
    PROBE_CHECK(find_stats_descriptor() > 2);
  } else {
    PROBE_CHECK(write(p.a, "abc", 3) == 3);
  }
  char buf[4];
  read_exactly(p.b, buf, 3);
  close(p.a);
  close(p.b);
  expect_pair(3);
  expect_count(2);
}

void stats_raw_close_listener() {
  // A raw close of the stats descriptor, then a raw dup3 of a listener onto its number:
  // the shim must not write its lines into the listener (SIGPIPE would end the program).
  int l = listener();
  int s = find_stats_descriptor();
  if (s >= 0) {
    PROBE_CHECK(syscall(SYS_close, s) == 0);
    PROBE_CHECK(syscall(SYS_dup3, l, s, 0) == s);
  }
  Pair p = pair();
  round_trip(p, 2);
  close(p.a);
  close(p.b);
  if (s >= 0) PROBE_CHECK(close(s) == 0);  // the program's listener: the kernel closes it
  close(l);
  expect_count(0);  // the stats file went with the raw close
}

void stats_raw_close_reused() {
  // A raw close of the stats descriptor, then the program's connection at its number: the
  // peer must never read a stats line.
  int l = listener();
  int c = connect_to(l);
  int b = accept(l, nullptr, nullptr);
  PROBE_CHECK(b >= 0);
  int s = find_stats_descriptor();
  if (s >= 0) PROBE_CHECK(syscall(SYS_close, s) == 0);
  int x = fcntl(c, F_DUPFD_CLOEXEC, s >= 0 ? s : 100);
  PROBE_CHECK(x >= 0 && (s < 0 || x == s));
  PROBE_CHECK(close(c) == 0);
  Pair q = pair();
  round_trip(q, 5);
  close(q.a);
  close(q.b);
  PROBE_CHECK(write(x, "k", 1) == 1);
  char buf[512];
  PROBE_CHECK(recv(b, buf, sizeof buf, 0) == 1 && buf[0] == 'k');
  PROBE_CHECK(recv(b, buf, sizeof buf, MSG_DONTWAIT) == -1 && errno == EAGAIN);
  close(x);
  close(b);
  close(l);
  expect_count(0);
}

void stdio_closed() {
  // Started with stdin closed (as some daemons are), the program's lowest free number is
  // 0 and stays its own: the shim's stats file must not take it.
  if (std::getenv("PROBE_STDIO_CHILD") == nullptr) {
    PROBE_CHECK(setenv("PROBE_STDIO_CHILD", "1", 1) == 0);
    PROBE_CHECK(close(0) == 0);
    std::fflush(stdout);
    execl("/proc/self/exe", "posix_probe", "stdio_closed", static_cast<char*>(nullptr));
    PROBE_CHECK(!"exec");
  }
  PROBE_CHECK(fcntl(0, F_GETFD) == -1 && errno == EBADF);
  int f = open("/dev/null", O_RDONLY);
  PROBE_CHECK(f == 0);
  Pair p = pair();
  round_trip(p, 6);
  close(p.a);
  close(p.b);
  expect_pair(6);
  expect_count(2);
}

void bad_pointers() {
  // EFAULT is the kernel's answer to a bad address, under the shim too (never SIGSEGV).
  int l = listener();
  int c = connect_to(l);
  errno = 0;
  PROBE_CHECK(accept(l, reinterpret_cast<sockaddr*>(8), reinterpret_cast<socklen_t*>(64)) == -1 &&
              errno == EFAULT);
  int d = socket(AF_INET, SOCK_STREAM, 0);
  PROBE_CHECK(d >= 0);
  errno = 0;
  PROBE_CHECK(connect(d, reinterpret_cast<const sockaddr*>(8), sizeof(sockaddr_in)) == -1 &&
              errno == EFAULT);
  close(d);
  close(c);
  close(l);
  expect_line(getpid(), 0, 0);
  expect_count(1);  // c connected (the accepted end went with the EFAULT); d never did
}

void raw_fork() {
  // A _Fork() child runs no fork handlers: it must not report its parent's connections
  // (under the parent's pid) when it exits.
  Pair p = pair();
  round_trip(p, 3);
  std::fflush(stdout);
  pid_t child = _Fork();
  PROBE_CHECK(child >= 0);
  if (child == 0) std::exit(0);
  wait_ok(child);
  close(p.a);
  close(p.b);
  expect_pair(3);
  expect_count(2);
}

namespace {

void* unshare_and_close(void* arg) {
  auto* p = static_cast<Pair*>(arg);
  PROBE_CHECK(close_range(3, ~0U, CLOSE_RANGE_UNSHARE) == 0);
  PROBE_CHECK(fcntl(p->a, F_GETFD) == -1 && errno == EBADF);  // in this thread's copy only
  return nullptr;
}

}  // namespace

void close_range_unshare() {
  // CLOSE_RANGE_UNSHARE closes in a private copy of the descriptor table: the other
  // threads still hold every number, and the shim must still know them.
  Pair p = pair();
  round_trip(p, 7);
  pthread_t t;
  PROBE_CHECK(pthread_create(&t, nullptr, unshare_and_close, &p) == 0);
  PROBE_CHECK(pthread_join(t, nullptr) == 0);
  PROBE_CHECK(fcntl(p.a, F_GETFD) >= 0);
  round_trip(p, 7);  // counted on the same connections
  close(p.a);
  close(p.b);
  expect_pair(14);
  expect_count(2);
}

void splice_and_sendfile() {
  // Bytes a connection moves through a pipe with splice(), and out of a socket with
  // sendfile() (a pipe as out_fd), count like any other.
  Pair p = pair();
  int pipe_fds[2];
  PROBE_CHECK(pipe(pipe_fds) == 0);
  char data[1000];
  std::memset(data, 's', sizeof data);
  write_all(p.a, data, sizeof data);
  for (size_t moved = 0; moved < sizeof data;) {  // socket -> pipe
    ssize_t n = splice(p.b, nullptr, pipe_fds[1], nullptr, sizeof data - moved, 0);
    PROBE_CHECK(n > 0);
    moved += static_cast<size_t>(n);
  }
  for (size_t moved = 0; moved < sizeof data;) {  // pipe -> socket
    ssize_t n = splice(pipe_fds[0], nullptr, p.b, nullptr, sizeof data - moved, 0);
    PROBE_CHECK(n > 0);
    moved += static_cast<size_t>(n);
  }
  read_exactly(p.a, data, sizeof data);
  write_all(p.a, data, 300);
  for (size_t moved = 0; moved < 300;) {  // socket -> pipe with sendfile
    ssize_t n = sendfile(pipe_fds[1], p.b, nullptr, 300 - moved);
    PROBE_CHECK(n > 0);
    moved += static_cast<size_t>(n);
  }
  read_exactly(pipe_fds[0], data, 300);
  PROBE_CHECK(data[0] == 's' && data[299] == 's');
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(p.a);
  close(p.b);
  expect_line(getpid(), 1000, 1300);
  expect_line(getpid(), 1300, 1000);
  expect_count(2);
}

void fifo_reader_gone() {
  // Started by PosixPreloadStats with RMSG_STATS a FIFO whose last reader it holds: once
  // the test has closed its own, this closes that reader, and the stats lines that follow
  // meet a FIFO nobody reads. Without the test's descriptors, a plain pair.
  const char* reader = std::getenv("PROBE_READER_FD");
  const char* sync = std::getenv("PROBE_SYNC_FD");
  if (reader != nullptr && sync != nullptr) {
    char c;
    PROBE_CHECK(read(std::atoi(sync), &c, 1) == 1);
    PROBE_CHECK(close(std::atoi(reader)) == 0);
  }
  Pair p = pair();
  round_trip(p, 2);
  close(p.a);
  close(p.b);
  PROBE_CHECK(write(1, "", 0) == 0);  // still alive after the lines
  expect_pair(2);
  expect_count(2);
}

}  // namespace probe
