#include "posix/private_fd.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace rmsg::posix {
namespace {

// Numbers from here up are where the shim keeps its own: 960, or 64 below a soft limit
// under 1024 (below the table's size either way), where a program that takes the lowest
// free number (every open(), socket(), dup()) does not get to for a long while. Not near a
// large soft limit: the kernel sizes a process's descriptor array by its highest number
// (and fork() copies it), so a descriptor near 2^20 would cost every process 8 MiB.
int high_base(const Runtime& rt) {
  rlimit lim{};
  long n = rt.table.size();
  if (n > 1024) n = 1024;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      static_cast<long>(lim.rlim_cur) < n) {
    n = static_cast<long>(lim.rlim_cur);
  }
  return static_cast<int>(n > 256 ? n - 64 : n / 2 > 3 ? n / 2 : 3);
}

// A copy of fd at a high number, else at 3 or above; -1 when none is free.
int copy_high(const Runtime& rt, int fd) {
  int moved = g_real.fcntl(fd, F_DUPFD_CLOEXEC, high_base(rt));
  if (moved < 0) moved = g_real.fcntl(fd, F_DUPFD_CLOEXEC, 3);
  return moved;
}

void set_private(Runtime& rt, int fd, bool on) {
  if (FdSlot* s = rt.table.slot(fd)) {
    if (on) {
      s->flags.fetch_or(kFdPrivate, std::memory_order_acq_rel);
    } else {
      s->flags.fetch_and(~kFdPrivate, std::memory_order_acq_rel);
    }
  }
}

void forget(Runtime& rt, int fd) {
  int expected = fd;
  if (rt.stats_fd.compare_exchange_strong(expected, -1, std::memory_order_acq_rel)) {
    set_private(rt, fd, false);
  }
}

}  // namespace

void open_stats_file(Runtime& rt) {
  const char* path = std::getenv("RMSG_STATS");
  if (path == nullptr || *path == '\0' || !start_tracking(rt)) return;
  // O_NOFOLLOW: a symlink planted at the path (the docs' example is in /tmp) is refused.
  // O_NONBLOCK: a FIFO without a reader fails instead of blocking the program's start.
  int fd = open(
      path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0644);
  if (fd < 0) return;
  int fl = g_real.fcntl(fd, F_GETFL, nullptr);
  if (fl >= 0) g_real.fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  int high = copy_high(rt, fd);
  g_real.close(fd);
  struct stat st {};
  if (high < 0 || rt.table.slot(high) == nullptr || fstat(high, &st) != 0) {
    if (high >= 0) g_real.close(high);
    return;
  }
  rt.stats_dev = st.st_dev;
  rt.stats_ino = st.st_ino;
  set_private(rt, high, true);
  rt.stats_fd.store(high, std::memory_order_release);
}

int checked_stats_fd(Runtime& rt) {
  int fd = rt.stats_fd.load(std::memory_order_acquire);
  if (fd < 0) return -1;
  const FdSlot* s = rt.table.slot(fd);
  struct stat st {};
  int saved = errno;
  bool ours = s != nullptr && (s->flags.load(std::memory_order_acquire) & kFdPrivate) != 0 &&
              fstat(fd, &st) == 0 && st.st_dev == rt.stats_dev && st.st_ino == rt.stats_ino;
  errno = saved;
  if (ours) return fd;
  forget(rt, fd);
  return -1;
}

bool is_private(Runtime& rt, int fd) {
  const FdSlot* s = rt.table.slot(fd);
  if (s == nullptr || (s->flags.load(std::memory_order_acquire) & kFdPrivate) == 0) return false;
  if (rt.stats_fd.load(std::memory_order_acquire) != fd) {
    set_private(rt, fd, false);  // left over from a file the shim gave up
    return false;
  }
  return checked_stats_fd(rt) == fd;
}

void move_private_away(Runtime& rt, int fd) {
  if (!is_private(rt, fd)) return;
  int saved = errno;
  int moved = copy_high(rt, fd);
  errno = saved;
  if (moved < 0 || rt.table.slot(moved) == nullptr) {
    if (moved >= 0) g_real.close(moved);
    forget(rt, fd);  // no room: the program's number wins, the stats stop
    return;
  }
  // The new number is the shim's before the old one turns public.
  set_private(rt, moved, true);
  int expected = fd;
  if (!rt.stats_fd.compare_exchange_strong(expected, moved, std::memory_order_acq_rel)) {
    set_private(rt, moved, false);
    g_real.close(moved);
    return;
  }
  set_private(rt, fd, false);
}

}  // namespace rmsg::posix
