// Built into librmsg-preload-start-hook.so only: the shim calls this from inside its
// start-up (phase two), and it calls back into the shim's own exported socket calls, as a
// library the shim initialises would. Those calls must pass straight through; a call from
// another thread must wait for the start to end. It prints a line the test looks for, or
// exits with status 3.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
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

}  // namespace

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
  const char line[] = "start hook: re-entered socket, read, close\n";
  if (write_fd(1, line, sizeof line - 1) != sizeof line - 1) fail("start hook: write failed\n");
}
