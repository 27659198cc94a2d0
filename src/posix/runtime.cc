#include "posix/runtime.h"
#include "posix/upgrade.h"

#include <dlfcn.h>
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
// Only in tests/posix's librmsg-preload-start-hook.so: call back into the shim from inside
// its start, before anything is resolved (a preloaded malloc would) and after the stats
// file opened (as libibverbs and librdmacm will when the RDMA upgrade initialises them).
extern "C" void rmsg_posix_phase_one_hook();
extern "C" void rmsg_posix_start_hook();
#endif

namespace rmsg::posix {

constinit Runtime g_runtime;
constinit std::atomic<bool> g_runtime_on{false};

namespace {

enum class Phase : std::uint64_t { not_started, starting, on, off };

// The phase and, while starting, the starting thread's id, in one word: from the moment
// the phase says "starting" the starter is known, so a signal handler that runs on it
// right then is recognised and passes through.
std::atomic<std::uint64_t> g_start{0};

constexpr std::uint64_t word(Phase p, long tid) {
  return (static_cast<std::uint64_t>(tid) << 2) | static_cast<std::uint64_t>(p);
}
constexpr Phase phase_of(std::uint64_t w) {
  return static_cast<Phase>(w & 3);
}
constexpr long thread_of(std::uint64_t w) {
  return static_cast<long>(w >> 2);
}

long current_thread() {
  return syscall(SYS_gettid);
}

// False when the thread that is starting the shim is not in this process: a fork() child
// of a process whose start was under way on another thread (it will never finish here).
bool starter_alive(long tid) {
  return syscall(SYS_tgkill, syscall(SYS_getpid), tid, 0) == 0 || errno != ESRCH;
}

void after_fork_in_parent() {
  g_runtime.fork_epoch.fetch_add(1, std::memory_order_relaxed);
}

void after_fork_in_child() {
  g_runtime.pid.store(static_cast<int>(syscall(SYS_getpid)), std::memory_order_relaxed);
  g_runtime.fork_epoch.fetch_add(1, std::memory_order_relaxed);
}

void report_at_exit() {
  if (phase_of(g_start.load(std::memory_order_acquire)) == Phase::on) {
    report_open_connections(g_runtime);
  }
}

bool shim_switched_off() {
  const char* v = std::getenv("RMSG_PRELOAD");
  return v != nullptr && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0);
}

// RMSG_UPGRADE=on: the upgrade engine, librmsg-upgrade.so next to this library, unless one
// is linked in already (rmsg's tests). Loaded inside the start, so the calls its libraries'
// constructors make (libibverbs opening files) pass straight through. Not found: no
// upgrade, every connection says `not_built`.
void load_upgrade_module() {
  const char* v = std::getenv("RMSG_UPGRADE");
  if (v == nullptr || std::strcmp(v, "on") != 0 || upgrade_hooks() != nullptr) return;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&g_upgrade_hooks), &self) == 0 || self.dli_fname == nullptr) {
    return;
  }
  static constexpr char kName[] = "librmsg-upgrade.so";
  char path[4096];
  std::size_t n = std::strlen(self.dli_fname);
  const char* slash = std::strrchr(self.dli_fname, '/');
  std::size_t dir = slash == nullptr ? 0 : static_cast<std::size_t>(slash - self.dli_fname) + 1;
  if (n >= sizeof path || dir + sizeof kName > sizeof path) return;
  std::memcpy(path, self.dli_fname, dir);
  std::memcpy(path + dir, kName, sizeof kName);
  void* module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) return;
  using Entry = const void* (*)(const void*);
  auto entry = reinterpret_cast<Entry>(dlsym(module, "rmsg_upgrade_module"));
  if (entry == nullptr) return;
  g_upgrade_hooks.store(static_cast<const UpgradeHooks*>(entry(&g_real)),
                        std::memory_order_release);
}

Phase start() {
#ifdef RMSG_POSIX_START_HOOK
  rmsg_posix_phase_one_hook();
#endif
  if (shim_switched_off()) return Phase::off;
  Runtime& rt = g_runtime;
  rt.pid.store(static_cast<int>(syscall(SYS_getpid)), std::memory_order_relaxed);
  open_stats_file(rt);
  load_upgrade_module();
#ifdef RMSG_POSIX_START_HOOK
  rmsg_posix_start_hook();
#endif
  return Phase::on;
}

// Runs start() on this thread, which holds the "starting" word `held`.
Runtime* run_start(std::uint64_t held) {
  Phase result = start();
  g_start.compare_exchange_strong(held, word(result, 0), std::memory_order_acq_rel);
  if (result != Phase::on) return nullptr;
  g_runtime_on.store(true, std::memory_order_release);
  // Registered once the start is over and every waiting thread released: both take C
  // library locks that a thread inside fork() (running other handlers that call into the
  // shim) may hold. A fork() in between makes a child the shim treats as a vfork child.
  pthread_atfork(nullptr, after_fork_in_parent, after_fork_in_child);
  std::atexit(report_at_exit);
  return &g_runtime;
}

}  // namespace

Runtime* start_or_wait() {
  std::uint64_t w = g_start.load(std::memory_order_acquire);
  if (phase_of(w) == Phase::on) return &g_runtime;
  if (phase_of(w) == Phase::off) return nullptr;
  int saved = errno;  // the program's call must not see the start's errno
  long self = current_thread();
  Runtime* rt = nullptr;
  for (;;) {
    if (phase_of(w) == Phase::not_started ||
        (phase_of(w) == Phase::starting && thread_of(w) != self && !starter_alive(thread_of(w)))) {
      // Not started, or started by a thread this process (a fork child) does not have.
      std::uint64_t mine = word(Phase::starting, self);
      if (g_start.compare_exchange_strong(w, mine, std::memory_order_acq_rel)) {
        rt = run_start(mine);
        break;
      }
      continue;
    }
    if (phase_of(w) != Phase::starting) {
      rt = phase_of(w) == Phase::on ? &g_runtime : nullptr;
      break;
    }
    // From inside start() on this thread (a library the shim initialises, a signal
    // handler): pass through. Elsewhere: wait for the end.
    if (thread_of(w) == self) break;
    sched_yield();
    w = g_start.load(std::memory_order_acquire);
  }
  errno = saved;
  return rt;
}

bool foreign_process(const Runtime& rt) {
  return static_cast<int>(syscall(SYS_getpid)) != rt.pid.load(std::memory_order_relaxed);
}

bool start_tracking(Runtime& rt) {
  static std::atomic<bool> resolved{false};
  if (!rt.table.ensure()) return false;
  if (!resolved.load(std::memory_order_acquire) && !resolved.exchange(true)) resolve_real_calls();
  return true;
}

SocketObject* adopt(Runtime& rt, int fd, SocketState state) {
  if (!start_tracking(rt) || rt.table.slot(fd) == nullptr) return nullptr;
  SocketObject* o = rt.table.allocate(state, rt.pid.load(std::memory_order_relaxed));
  if (o == nullptr) return nullptr;
  o->io_fork_epoch.store(rt.fork_epoch.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // A number the kernel hands out again was closed behind the shim's back (fclose of an
  // fdopen()ed socket, a raw system call): forget what the table still said about it.
  if (SocketObject* stale = rt.table.attach(fd, o)) release_object(rt, stale);
  return o;
}

std::atomic<const UpgradeHooks*> g_upgrade_hooks{nullptr};

void release_object(Runtime& rt, SocketObject* o) {
  if (!FdTable::release(o)) return;
  if (UpgradeConn* c = o->upgrade.exchange(nullptr, std::memory_order_acq_rel)) {
    if (const UpgradeHooks* h = upgrade_hooks()) h->closed(*c, *o);
  }
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
