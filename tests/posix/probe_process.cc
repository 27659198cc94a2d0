// Descriptors and processes: dup* share a connection; close_range/closefrom leave the
// shim's own descriptors alone; fork (accept-then-fork, a child that only closes), vfork
// and posix_spawn; a signal handler on the data path that longjmps out.
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <initializer_list>

#include "posix/probe_scenarios.h"
#include "posix/probe_util.h"

extern char** environ;

namespace probe {
namespace {

void wait_ok(pid_t child) {
  int status = 0;
  PROBE_CHECK(waitpid(child, &status, 0) == child);
  PROBE_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// One round trip of n bytes over p, both directions counted by the caller.
void round_trip(const Pair& p, size_t n) {
  char buf[64];
  std::memset(buf, 'r', sizeof buf);
  write_all(p.a, buf, n);
  read_exactly(p.b, buf, n);
}

}  // namespace

void dup_shares() {
  Pair p = pair();
  int d1 = dup(p.a);
  int d2 = dup3(p.a, 101, O_CLOEXEC);
  int d3 = fcntl(p.a, F_DUPFD_CLOEXEC, 200);
  PROBE_CHECK(d1 >= 0 && d2 == 101 && d3 >= 200);
  for (int fd : {p.a, d1, d2, d3}) PROBE_CHECK(write(fd, "x", 1) == 1);
  PROBE_CHECK(close(p.a) == 0);  // the others still hold the connection
  PROBE_CHECK(write(d1, "y", 1) == 1);
  PROBE_CHECK(close(d1) == 0 && close(d2) == 0);
  PROBE_CHECK(write(d3, "z", 1) == 1);
  char buf[8];
  read_exactly(p.b, buf, 6);
  PROBE_CHECK(std::memcmp(buf, "xxxxyz", 6) == 0);
  // dup2 onto a number holding another connection closes that one (its last descriptor).
  Pair q = pair();
  round_trip(q, 2);
  PROBE_CHECK(dup2(d3, q.a) == q.a);
  PROBE_CHECK(write(q.a, "w", 1) == 1);  // now p's connection
  read_exactly(p.b, buf, 1);
  PROBE_CHECK(read(q.b, buf, 1) == 0);  // q's connection was closed by the dup2
  close(q.a);
  close(d3);
  close(q.b);
  close(p.b);
  expect_line(getpid(), 0, 7);
  expect_line(getpid(), 7, 0);
  expect_line(getpid(), 0, 2);
  expect_line(getpid(), 2, 0);
  expect_count(4);
}

void close_range_keeps_private() {
  // Under the shim, RMSG_STATS's file is the shim's own descriptor: lines for the
  // connections made after close_range() and closefrom() prove it survived both.
  Pair p = pair();
  round_trip(p, 3);
  PROBE_CHECK(close_range(3, ~0U, 0) == 0);
  PROBE_CHECK(fcntl(p.a, F_GETFD) == -1 && errno == EBADF);
  Pair q = pair();
  round_trip(q, 4);
  closefrom(3);
  PROBE_CHECK(fcntl(q.a, F_GETFD) == -1 && errno == EBADF);
  Pair r = pair();
  round_trip(r, 5);
  PROBE_CHECK(close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0);  // marks, closes nothing
  PROBE_CHECK(fcntl(r.a, F_GETFD) == FD_CLOEXEC);
  close(r.a);
  close(r.b);
  for (int n : {3, 4, 5}) {
    expect_line(getpid(), 0, static_cast<std::uint64_t>(n));
    expect_line(getpid(), static_cast<std::uint64_t>(n), 0);
  }
  expect_count(6);
}

void fork_server() {
  // Accept, fork a child to serve, close in the parent: the child reports the connection.
  int l = listener();
  int c = connect_to(l);
  int s = accept(l, nullptr, nullptr);
  PROBE_CHECK(s >= 0);
  std::fflush(stdout);
  pid_t child = fork();
  PROBE_CHECK(child >= 0);
  if (child == 0) {
    close(l);
    char buf[16];
    read_exactly(s, buf, 5);
    write_all(s, "0123456789", 10);
    close(s);
    std::exit(0);  // the inherited client c is untouched: the child reports nothing for it
  }
  close(s);  // handed to the child: no line from the parent
  write_all(c, "hello", 5);
  char buf[16];
  read_exactly(c, buf, 10);
  PROBE_CHECK(std::memcmp(buf, "0123456789", 10) == 0);
  wait_ok(child);
  close(c);
  close(l);
  expect_line(child, 5, 10);
  expect_line(getpid(), 10, 5);
  expect_count(2);
}

void fork_child_closes() {
  Pair p = pair();
  round_trip(p, 1);
  std::fflush(stdout);
  pid_t child = fork();
  PROBE_CHECK(child >= 0);
  if (child == 0) {
    close(p.a);
    close(p.b);
    std::exit(0);
  }
  wait_ok(child);
  round_trip(p, 4);  // unbroken for the parent
  close(p.a);
  close(p.b);
  expect_line(getpid(), 0, 5);
  expect_line(getpid(), 5, 0);
  expect_count(2);
}

void vfork_spawn() {
  // A vfork child shares the parent's memory: its close_range must not touch the
  // parent's table (the parent's stats lines below would go missing).
  Pair p = pair();
  round_trip(p, 2);
  pid_t child = vfork();
  PROBE_CHECK(child >= 0);
  if (child == 0) {
    close_range(3, ~0U, 0);
    _exit(0);
  }
  wait_ok(child);
  posix_spawn_file_actions_t fa;
  PROBE_CHECK(posix_spawn_file_actions_init(&fa) == 0);
  PROBE_CHECK(posix_spawn_file_actions_addclosefrom_np(&fa, 3) == 0);
  pid_t spawned = -1;
  char true_path[] = "/bin/true";
  char* argv[] = {true_path, nullptr};
  PROBE_CHECK(posix_spawn(&spawned, true_path, &fa, nullptr, argv, environ) == 0);
  wait_ok(spawned);
  posix_spawn_file_actions_destroy(&fa);
  round_trip(p, 3);
  close(p.a);
  close(p.b);
  expect_line(getpid(), 0, 5);
  expect_line(getpid(), 5, 0);
  expect_count(2);
}

namespace {

sigjmp_buf g_jump;
int g_signal_fd = -1;
volatile sig_atomic_t g_signal_writes = 0;
volatile sig_atomic_t g_jump_armed = 0;  // g_jump is valid only inside the loop

void on_alarm(int) {
  // The data path from a handler, then out of it with a longjmp, wherever main was.
  // A tick already pending when the timer stops lands after the loop: it must not jump
  // into a frame that is gone.
  if (g_jump_armed == 0) return;
  if (write(g_signal_fd, "s", 1) == 1) g_signal_writes = g_signal_writes + 1;  // NOLINT
  siglongjmp(g_jump, 1);
}

}  // namespace

void signal_longjmp() {
  Pair p = pair();
  // Non-blocking: once the socket buffers are full the handler's writes fail (EAGAIN)
  // instead of blocking in the handler; only the ones that succeed are counted.
  PROBE_CHECK(fcntl(p.a, F_SETFL, O_NONBLOCK) == 0);
  g_signal_fd = p.a;
  struct sigaction sa {};
  sa.sa_handler = on_alarm;
  PROBE_CHECK(sigaction(SIGALRM, &sa, nullptr) == 0);
  itimerval it{{0, 200}, {0, 200}};
  static int jumps = 0;
  static int i;  // survives the longjmps (not a register)
  for (i = 0; i < 3000; ++i) {
    if (sigsetjmp(g_jump, 1) != 0) {
      ++jumps;
      continue;
    }
    if (i == 0) {
      g_jump_armed = 1;  // g_jump is set
      PROBE_CHECK(setitimer(ITIMER_REAL, &it, nullptr) == 0);
    }
    int d = dup(p.a);
    if (d >= 0) close(d);
    int t = socket(AF_INET, SOCK_STREAM, 0);
    if (t >= 0) close(t);
    pollfd pfd{p.b, POLLIN, 0};
    poll(&pfd, 1, 0);
  }
  g_jump_armed = 0;
  itimerval stop{};
  PROBE_CHECK(setitimer(ITIMER_REAL, &stop, nullptr) == 0);
  signal(SIGALRM, SIG_IGN);
  PROBE_CHECK(jumps > 0);
  int n = g_signal_writes;
  PROBE_CHECK(close(p.a) == 0);
  // Exactly n bytes, then nothing more. Whether EOF follows depends on where the jumps
  // landed: one between dup() and close() leaks a duplicate, which keeps the connection
  // open (EAGAIN); if none did, close(p.a) was the last reference (EOF). Both are right.
  char buf[4096];
  for (int left = n; left > 0;) {
    ssize_t r = read(p.b, buf, left < 4096 ? static_cast<size_t>(left) : sizeof buf);
    PROBE_CHECK(r > 0);
    left -= static_cast<int>(r);
  }
  errno = 0;
  ssize_t tail = recv(p.b, buf, 1, MSG_DONTWAIT);
  PROBE_CHECK(tail == 0 || (tail == -1 && errno == EAGAIN));
  close(p.b);
  expect_line(getpid(), 0, static_cast<std::uint64_t>(n));
  expect_line(getpid(), static_cast<std::uint64_t>(n), 0);
  expect_count(2);
}

}  // namespace probe

namespace probe {

void exit_with_open() {
  // Connections still open at exit are reported by the process that owns them; a fork
  // child that exits holding them untouched reports none.
  Pair p = pair();
  round_trip(p, 6);
  std::fflush(stdout);
  pid_t child = fork();
  PROBE_CHECK(child >= 0);
  if (child == 0) std::exit(0);
  wait_ok(child);
  expect_line(getpid(), 0, 6);
  expect_line(getpid(), 6, 0);
  expect_count(2);
  std::fflush(stdout);
  std::exit(0);  // p.a and p.b still open
}

}  // namespace probe

namespace probe {
namespace {

constexpr int kThreads = 4;
constexpr int kConnectionsPerThread = 100;

struct Worker {
  int listener = -1;
  int index = 0;
};

void* connect_and_close(void* arg) {
  auto* w = static_cast<Worker*>(arg);
  for (int i = 0; i < kConnectionsPerThread; ++i) {
    int c = connect_to(w->listener);
    int s = accept(w->listener, nullptr, nullptr);  // the worker's own listener
    PROBE_CHECK(s >= 0);
    int d = dup(c);  // the table's sharing under concurrency
    char buf[8] = {};
    size_t n = static_cast<size_t>(w->index + 1);
    write_all(d, buf, n);
    read_exactly(s, buf, n);
    close(c);
    close(d);
    close(s);
  }
  return nullptr;
}

}  // namespace

void threads() {
  // Threads making, sharing and closing connections at once: every connection is
  // reported exactly once with its own counts.
  Worker w[kThreads];
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    w[i].listener = listener(kConnectionsPerThread);
    w[i].index = i;
    PROBE_CHECK(pthread_create(&t[i], nullptr, connect_and_close, &w[i]) == 0);
  }
  for (auto& th : t) PROBE_CHECK(pthread_join(th, nullptr) == 0);
  for (auto& wk : w) close(wk.listener);
  for (int i = 0; i < kThreads; ++i) {
    for (int k = 0; k < kConnectionsPerThread; ++k) {
      expect_line(getpid(), 0, static_cast<std::uint64_t>(i + 1));
      expect_line(getpid(), static_cast<std::uint64_t>(i + 1), 0);
    }
  }
  expect_count(2 * kThreads * kConnectionsPerThread);
}

}  // namespace probe
