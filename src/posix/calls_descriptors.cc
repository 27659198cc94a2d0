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
#include "posix/runtime.h"
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

// Closes [first, last] in the kernel, skipping private descriptors. The table forgets the
// numbers first (as close() does): once the kernel closes one, another thread may be
// handed it at once.
int close_range_around_private(Runtime& rt, unsigned first, unsigned last, int flags) {
  unsigned top = static_cast<unsigned>(rt.table.max_fd_seen());
  if ((flags & CLOSE_RANGE_CLOEXEC) == 0) {
    for (unsigned fd = first; fd <= last && fd <= top; ++fd) {
      FdSlot* s = rt.table.slot(static_cast<int>(fd));
      if (s != nullptr && tracked(s) && !is_private(rt, static_cast<int>(fd))) {
        drop(rt, static_cast<int>(fd));
      }
    }
  }
  unsigned from = first;
  int rc = 0;
  for (unsigned fd = first; fd <= last && fd <= top; ++fd) {
    if (!is_private(rt, static_cast<int>(fd))) continue;
    if (fd > from && real_close_range(from, fd - 1, flags) != 0) rc = -1;
    from = fd + 1;
  }
  if (from <= last && real_close_range(from, last, flags) != 0) rc = -1;
  return rc;
}

}  // namespace

void link_duplicate(Runtime& rt, int from, int to) {
  FdSlot* src = rt.table.slot(from);
  FdSlot* dst = rt.table.slot(to);
  if (dst == nullptr) return;
  SocketObject* o = src == nullptr ? nullptr : rt.table.object(from);
  std::uint32_t epoll_id = src == nullptr ? 0 : src->epoll_id.load(std::memory_order_acquire);
  if (o != nullptr) o->refs.fetch_add(1, std::memory_order_acq_rel);
  SocketObject* before = rt.table.attach(to, o);
  if (epoll_id != 0) dst->epoll_id.store(epoll_id, std::memory_order_release);
  if (before != nullptr) release_object(rt, before);
}

}  // namespace rmsg::posix

using namespace rmsg::posix;

extern "C" {

int rmsg_close(int fd) {
  Runtime* rt = runtime();
  FdSlot* s = rt == nullptr ? nullptr : rt->table.slot(fd);
  if (s == nullptr) return g_real.close(fd);
  if (is_private(*rt, fd)) {
    errno = EBADF;  // the shim's own: to the program it is not open
    return -1;
  }
  if (!tracked(s) || foreign_process(*rt)) return g_real.close(fd);
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
  if (!vacate_private(*rt, newfd)) {
    errno = EBUSY;
    return -1;
  }
  int n = g_real.dup3(fd, newfd, flags);
  if (n >= 0) link_duplicate(*rt, fd, n);
  return n;
}

int rmsg_dup2(int fd, int newfd) {
  Runtime* rt = runtime();
  if (rt == nullptr || fd == newfd || foreign_process(*rt)) return g_real.dup2(fd, newfd);
  if (!vacate_private(*rt, newfd)) {
    errno = EBUSY;
    return -1;
  }
  int n = g_real.dup2(fd, newfd);
  if (n >= 0) link_duplicate(*rt, fd, n);
  return n;
}

}  // extern "C"
