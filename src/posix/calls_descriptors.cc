// close, close_range, closefrom, dup, dup2, dup3: the descriptor numbers that refer to a
// managed socket. The kernel closes and duplicates; the shim follows. Nothing here locks
// or allocates (close and dup2 are async-signal-safe, and so is this), and a process that
// shares the table's memory without being its owner (vfork, posix_spawn) only passes through.
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "posix/descriptors.h"
#include "posix/private_fd.h"
#include "posix/runtime.h"
#include "posix/share_object.h"
#include "posix/upgrade.h"
#include "rmsg/socket.h"

namespace rmsg::posix {
namespace {

bool tracked(const FdSlot* s) {
  return s->object.load(std::memory_order_acquire) != 0 ||
         s->epoll_id.load(std::memory_order_acquire) != 0;
}

int real_close_range(unsigned first, unsigned last, int flags) {
  if (g_real.close_range != nullptr) return g_real.close_range(first, last, flags);
  return static_cast<int>(syscall(SYS_close_range, first, last, flags));
}

// Closes [first, last] in the kernel, around the shim's own descriptor. The table forgets
// the numbers first (as close() does): once the kernel closes one, another thread may be
// handed it at once. Its walk stops at the highest number it has recorded, so the range's
// size never matters (closefrom() is close_range(first, ~0U)). CLOSE_RANGE_UNSHARE closes
// in a private copy of the descriptor table: the other threads keep every number, so the
// table forgets nothing.
int close_range_around_private(Runtime& rt, unsigned first, unsigned last, int flags) {
  if ((flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) == 0) {
    int seen = rt.table.max_fd_seen();
    if (seen >= 0 && first <= static_cast<unsigned>(seen)) {
      unsigned top = last < static_cast<unsigned>(seen) ? last : static_cast<unsigned>(seen);
      for (unsigned fd = first; fd <= top; ++fd) {  // top < INT_MAX: no wrap
        FdSlot* s = rt.table.slot(static_cast<int>(fd));
        if (s != nullptr && tracked(s)) {
          settle_connect(rt, static_cast<int>(fd));
          drop(rt, static_cast<int>(fd));
        }
      }
    }
  }
  int own = rt.stats_fd.load(std::memory_order_acquire);
  if (own < 0 || static_cast<unsigned>(own) < first || static_cast<unsigned>(own) > last ||
      !is_private(rt, own)) {
    return real_close_range(first, last, flags);
  }
  int rc = 0;
  auto u = static_cast<unsigned>(own);
  if (u > first && real_close_range(first, u - 1, flags) != 0) rc = -1;
  if (u < last && real_close_range(u + 1, last, flags) != 0) rc = -1;
  return rc;
}

}  // namespace

void link_duplicate(Runtime& rt, int from, int to) {
  FdSlot* src = rt.table.slot(from);
  FdSlot* dst = rt.table.slot(to);
  if (dst == nullptr) return;
  SocketObject* o = src == nullptr ? nullptr
                                   : share_object(
                                         rt.table, *src, [] {},
                                         [&rt](SocketObject* given) { release_object(rt, given); });
  std::uint32_t epoll_id = src == nullptr ? 0 : src->epoll_id.load(std::memory_order_acquire);
  SocketObject* before = rt.table.attach(to, o);
  // mark_epoll also raises max_fd_seen: a set's last-number sweep must see this number.
  if (epoll_id != 0) rt.table.mark_epoll(to, epoll_id);
  if (before != nullptr) release_object(rt, before);
}

}  // namespace rmsg::posix

using namespace rmsg::posix;

extern "C" {

int rmsg_close(int fd) {
  Runtime* rt = runtime();
  FdSlot* s = rt == nullptr ? nullptr : rt->table.slot(fd);
  if (s == nullptr) return g_real.close(fd);
  bool own = (s->flags.load(std::memory_order_acquire) & kFdPrivate) != 0;
  if ((!tracked(s) && !own) || foreign_process(*rt)) return g_real.close(fd);
  // The shim's own file moves away; the program's close of the number is the kernel's.
  if (own) move_private_away(*rt, fd);
  settle_connect(*rt, fd);
  if (SocketObject* up = rt->table.object(fd)) {
    UpgradeConn* c = up->upgrade.load(std::memory_order_acquire);
    if (c != nullptr && up->refs.load(std::memory_order_acquire) == 1) {
      upgrade_hooks()->closing(*c, fd);  // the program's last number of an upgraded connection
    }
  }
  // Forget first: once the kernel closes, the number may be handed out again at once.
  SocketObject* o = rt->table.detach(fd);
  int rc = g_real.close(fd);
  int saved = errno;
  if (o != nullptr) release_object(*rt, o);
  errno = saved;
  return rc;
}

int rmsg_close_range(unsigned int first, unsigned int last, int flags) {
  Runtime* rt = runtime();
  // Arguments the kernel refuses (it then closes nothing) go to it untouched.
  bool known_flags = (flags & ~(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) == 0;
  if (rt == nullptr || first > last || !known_flags || foreign_process(*rt)) {
    return real_close_range(first, last, flags);
  }
  return close_range_around_private(*rt, first, last, flags);
}

void rmsg_closefrom(int lowfd) {
  if (lowfd < 0) lowfd = 0;
  if (rmsg_close_range(static_cast<unsigned>(lowfd), ~0U, 0) == 0) return;
  // No close_range in this kernel: close what the limit allows, one by one.
  long max = sysconf(_SC_OPEN_MAX);
  for (long fd = lowfd; fd < max; ++fd) rmsg_close(static_cast<int>(fd));
}

int rmsg_dup(int fd) {
  Runtime* rt = runtime();
  int n = g_real.dup(fd);
  if (n >= 0 && rt != nullptr && !foreign_process(*rt)) link_duplicate(*rt, fd, n);
  return n;
}

int rmsg_dup3(int fd, int newfd, int flags) {
  Runtime* rt = runtime();
  if (rt == nullptr || fd == newfd || foreign_process(*rt)) return g_real.dup3(fd, newfd, flags);
  move_private_away(*rt, newfd);
  int n = g_real.dup3(fd, newfd, flags);
  if (n >= 0) link_duplicate(*rt, fd, n);
  return n;
}

int rmsg_dup2(int fd, int newfd) {
  Runtime* rt = runtime();
  if (rt == nullptr || fd == newfd || foreign_process(*rt)) return g_real.dup2(fd, newfd);
  move_private_away(*rt, newfd);
  int n = g_real.dup2(fd, newfd);
  if (n >= 0) link_duplicate(*rt, fd, n);
  return n;
}

}  // extern "C"
