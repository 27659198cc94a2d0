#include "posix/runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "posix/private_fd.h"
#include "posix/stats.h"

#ifdef RMSG_POSIX_START_HOOK
// Only in tests/posix's librmsg-preload-start-hook.so: calls back into the shim from inside
// phase two, as libibverbs and librdmacm will when the RDMA upgrade initialises them.
extern "C" void rmsg_posix_start_hook();
#endif

namespace rmsg::posix {

constinit Runtime g_runtime;
constinit std::atomic<bool> g_runtime_on{false};

namespace {

enum class Phase : int { not_started, starting, on, off };

std::atomic<Phase> g_phase{Phase::not_started};
std::atomic<long> g_starting_thread{0};

long current_thread() {
  return syscall(SYS_gettid);
}

void after_fork_in_parent() {
  g_runtime.fork_epoch.fetch_add(1, std::memory_order_relaxed);
}

void after_fork_in_child() {
  g_runtime.pid.store(static_cast<int>(syscall(SYS_getpid)), std::memory_order_relaxed);
  g_runtime.fork_epoch.fetch_add(1, std::memory_order_relaxed);
}

void report_at_exit() {
  if (g_phase.load(std::memory_order_acquire) == Phase::on) report_open_connections(g_runtime);
}

bool shim_switched_off() {
  const char* v = std::getenv("RMSG_PRELOAD");
  return v != nullptr && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0);
}

Phase start() {
  resolve_real_calls();  // phase one: nothing else before it
  if (shim_switched_off()) return Phase::off;
  Runtime& rt = g_runtime;
  if (!rt.table.init()) return Phase::off;
  rt.pid.store(static_cast<int>(syscall(SYS_getpid)), std::memory_order_relaxed);
  open_stats_file(rt);
#ifdef RMSG_POSIX_START_HOOK
  rmsg_posix_start_hook();
#endif
  pthread_atfork(nullptr, after_fork_in_parent, after_fork_in_child);
  std::atexit(report_at_exit);
  return Phase::on;
}

}  // namespace

Runtime* start_or_wait() {
  Phase p = g_phase.load(std::memory_order_acquire);
  if (p == Phase::on) return &g_runtime;
  if (p == Phase::off) return nullptr;
  Phase expected = Phase::not_started;
  if (g_phase.compare_exchange_strong(expected, Phase::starting, std::memory_order_acq_rel)) {
    g_starting_thread.store(current_thread(), std::memory_order_release);
    Phase result = start();
    g_phase.store(result, std::memory_order_release);
    if (result == Phase::on) g_runtime_on.store(true, std::memory_order_release);
    return result == Phase::on ? &g_runtime : nullptr;
  }
  // Starting: from inside start() on this thread, pass through; elsewhere wait for it.
  if (g_starting_thread.load(std::memory_order_acquire) == current_thread()) return nullptr;
  while ((p = g_phase.load(std::memory_order_acquire)) == Phase::starting) sched_yield();
  return p == Phase::on ? &g_runtime : nullptr;
}

bool foreign_process(const Runtime& rt) {
  return static_cast<int>(syscall(SYS_getpid)) != rt.pid.load(std::memory_order_relaxed);
}

SocketObject* adopt(Runtime& rt, int fd, SocketState state) {
  if (rt.table.slot(fd) == nullptr) return nullptr;
  SocketObject* o = rt.table.allocate(state, rt.pid.load(std::memory_order_relaxed));
  if (o == nullptr) return nullptr;
  o->io_fork_epoch.store(rt.fork_epoch.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // A number the kernel hands out again was closed behind the shim's back (fclose of an
  // fdopen()ed socket, a raw system call): forget what the table still said about it.
  if (SocketObject* stale = rt.table.attach(fd, o)) release_object(rt, stale);
  return o;
}

void release_object(Runtime& rt, SocketObject* o) {
  if (!FdTable::release(o)) return;
  report_closed(rt, *o);
  FdTable::free_object(o);
}

void settle_connect(Runtime& rt, int fd) {
  SocketObject* o = rt.table.object(fd);
  if (o == nullptr || o->state.load(std::memory_order_acquire) != SocketState::connecting) return;
  sockaddr_in6 peer{};
  socklen_t len = sizeof peer;
  int saved = errno;
  bool connected = g_real.getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0;
  errno = saved;
  SocketState expected = SocketState::connecting;
  o->state.compare_exchange_strong(
      expected, connected ? SocketState::connected : SocketState::fresh, std::memory_order_acq_rel);
}

void drop(Runtime& rt, int fd) {
  if (SocketObject* o = rt.table.detach(fd)) release_object(rt, o);
}

}  // namespace rmsg::posix
