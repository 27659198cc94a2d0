// The shim's process-wide state and its start-up. The start reads the environment and,
// with RMSG_STATS, opens the stats file; the C library's calls resolve at their first use
// (real.h), and the table is mapped at the first call that enters something
// (start_tracking); the fork and exit handlers are registered once the start is over. A
// call that arrives from inside the start on the initialising thread (a library the shim
// initialises opening files, a signal handler) passes straight through; a call from
// another thread waits for the end; in a fork() child of a process whose start was under
// way on another thread, the child's first call starts afresh.
#pragma once

#include <atomic>
#include <cstdint>

#include "posix/fd_table.h"
#include "posix/real.h"

namespace rmsg::posix {

struct Runtime {
  FdTable table;
  // This process's pid, refreshed in a fork() child (pthread_atfork). A vfork() or
  // posix_spawn() child shares the parent's memory and leaves this alone, which is how the
  // shim tells it apart (mutating calls compare it with getpid()).
  std::atomic<int> pid{0};
  // How many times this process has forked (each copy counts on from the fork).
  std::atomic<std::uint32_t> fork_epoch{1};
  std::atomic<std::uint32_t> next_epoll_id{1};
  // RMSG_STATS's file, the shim's own descriptor (private_fd.h); -1 when unset or given
  // up. Atomic: a program's close() or dup2() onto it moves it. Its identity, written
  // before stats_fd is published, tells the file from whatever else may take the number.
  std::atomic<int> stats_fd{-1};
  std::uint64_t stats_dev = 0;
  std::uint64_t stats_ino = 0;
};

extern Runtime g_runtime;
extern std::atomic<bool> g_runtime_on;  // set once start-up has succeeded
Runtime* start_or_wait();

// The runtime when the shim is on and started; null when it is off (RMSG_PRELOAD=off),
// could not start, or is starting on this very thread: the caller then passes through.
// Inline: every call asks, and after start-up the answer is one load.
inline Runtime* runtime() {
  if (__builtin_expect(g_runtime_on.load(std::memory_order_acquire), 1)) return &g_runtime;
  return start_or_wait();
}

// True in a process that shares memory with the one that set the runtime up but is not it
// (a vfork() / posix_spawn() child, or a child of a raw clone()): it must not change the
// table. Costs one getpid() system call: only descriptor-lifecycle calls use it.
bool foreign_process(const Runtime& rt);

// Maps the table and resolves every C library call, once (the first call that enters
// something: a TCP socket, an epoll set, the stats file); true when the table is there.
bool start_tracking(Runtime& rt);

// A new managed socket at fd (which must not be managed yet: a stale entry is dropped).
// Returns it, or null when the table is full (fd then stays unmanaged).
SocketObject* adopt(Runtime& rt, int fd, SocketState state);

// Forgets fd and, when it was the process's last descriptor of its socket, reports and
// frees the socket. Async-signal-safe.
void drop(Runtime& rt, int fd);
void release_object(Runtime& rt, SocketObject* o);

// Before the last look at a socket whose non-blocking connect() was still pending: was it
// ever connected? (A refused one writes no stats line, like a refused blocking connect.)
// One getpeername(), only for such sockets; errno untouched. Async-signal-safe.
void settle_connect(Runtime& rt, int fd);

// Counts I/O on o in this process; a child's first I/O on an inherited connection takes
// the ownership (and starts its counts) over for the child's copy. Bytes moved prove a
// pending connect completed.
inline void moved_bytes(SocketObject* o) {
  if (__builtin_expect(o->state.load(std::memory_order_relaxed) == SocketState::connecting, 0)) {
    SocketState expected = SocketState::connecting;
    o->state.compare_exchange_strong(expected, SocketState::connected, std::memory_order_acq_rel);
  }
}
inline void touch(Runtime& rt, SocketObject* o) {
  int pid = rt.pid.load(std::memory_order_relaxed);
  if (__builtin_expect(o->owner_pid.load(std::memory_order_relaxed) != pid, 0)) {
    o->bytes_in.store(0, std::memory_order_relaxed);
    o->bytes_out.store(0, std::memory_order_relaxed);
    o->owner_pid.store(pid, std::memory_order_relaxed);
  }
  std::uint32_t epoch = rt.fork_epoch.load(std::memory_order_relaxed);
  if (__builtin_expect(o->io_fork_epoch.load(std::memory_order_relaxed) != epoch, 0)) {
    o->io_fork_epoch.store(epoch, std::memory_order_relaxed);
  }
}

}  // namespace rmsg::posix
