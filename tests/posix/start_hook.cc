// Built into librmsg-preload-start-hook.so only: the shim calls these from inside its
// start-up (phase one, before the C library's calls are resolved, and phase two), and they
// call back into the shim's own exported socket calls, as a preloaded malloc or a library
// the shim initialises would. Those calls must pass straight through; a call from another
// thread must wait for the start to end; a fork() child of the starting process must not
// wait for a start that will never end there. They print lines the test looks for, or
// exit with status 3.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace {

template <typename F>
F shim_call(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));  // the preload's own export
}

void* other_thread(void*) {
  auto make = shim_call<int (*)(int, int, int)>("socket");
  auto close_fd = shim_call<int (*)(int)>("close");
  int fd = make(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) _exit(3);
  close_fd(fd);
  return nullptr;
}

void fail(const char* why) {
  [[maybe_unused]] ssize_t w = ::write(2, why, std::strlen(why));
  _exit(3);
}

void say(const char* line) {
  auto write_fd = shim_call<ssize_t (*)(int, const void*, size_t)>("write");
  size_t n = std::strlen(line);
  if (write_fd == nullptr || write_fd(1, line, n) != static_cast<ssize_t>(n)) {
    fail("start hook: write failed\n");
  }
}

// A child forked while the start is under way on this thread calls the shim: the start
// will never end in the child, which must not wait for it. Bounded: a child still running
// after 10 s is a hang.
bool g_forked = false;  // the child's own start runs the hooks again: fork only once

void fork_child_calls_the_shim() {
  if (g_forked) return;
  g_forked = true;
  pid_t child = fork();
  if (child < 0) fail("start hook: no fork\n");
  if (child == 0) {
    auto make = shim_call<int (*)(int, int, int)>("socket");
    auto close_fd = shim_call<int (*)(int)>("close");
    int s = make(AF_INET, SOCK_STREAM, 0);
    _exit(s >= 0 && close_fd(s) == 0 ? 0 : 4);
  }
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  pollfd p{pidfd, POLLIN, 0};
  if (pidfd < 0 || poll(&p, 1, 10000) != 1) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    fail("start hook: a fork child of the start hung in the shim\n");
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail("start hook: a fork child of the start failed\n");
  }
  close(pidfd);
}

}  // namespace

extern "C" void rmsg_posix_phase_one_hook() {
  auto make = shim_call<int (*)(int, int, int)>("socket");
  auto close_fd = shim_call<int (*)(int)>("close");
  auto read_fd = shim_call<ssize_t (*)(int, void*, size_t)>("read");
  if (make == nullptr || close_fd == nullptr || read_fd == nullptr) {
    fail("phase one hook: the shim's exports are not visible\n");
  }
  int s = make(AF_INET, SOCK_STREAM, 0);
  int f = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  char buf[64];
  if (s < 0 || close_fd(s) != 0 || f < 0 || read_fd(f, buf, sizeof buf) <= 0 || close_fd(f) != 0) {
    fail("phase one hook: socket/read/close re-entering the shim failed\n");
  }
  say("phase one hook: re-entered socket, read, close\n");
}

extern "C" void rmsg_posix_start_hook() {
  auto make = shim_call<int (*)(int, int, int)>("socket");
  auto close_fd = shim_call<int (*)(int)>("close");
  auto read_fd = shim_call<ssize_t (*)(int, void*, size_t)>("read");
  auto write_fd = shim_call<ssize_t (*)(int, const void*, size_t)>("write");
  if (make == nullptr || close_fd == nullptr || read_fd == nullptr || write_fd == nullptr) {
    fail("start hook: the shim's exports are not visible\n");
  }
  int s = make(AF_INET, SOCK_STREAM, 0);
  if (s < 0 || close_fd(s) != 0) fail("start hook: socket/close re-entering the shim failed\n");
  int f = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  char buf[64];
  if (f < 0 || read_fd(f, buf, sizeof buf) <= 0 || close_fd(f) != 0) {
    fail("start hook: read re-entering the shim failed\n");
  }
  pthread_t t;
  if (pthread_create(&t, nullptr, other_thread, nullptr) != 0 || pthread_detach(t) != 0) {
    fail("start hook: no thread\n");
  }
  if (g_forked) return;  // in the fork child, which took the start over
  fork_child_calls_the_shim();
  say("start hook: re-entered socket, read, close; a fork child did not wait\n");
}
