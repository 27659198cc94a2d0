// poll, ppoll, select, pselect, epoll_*. A managed TCP connection's descriptor is the
// kernel's socket, so the kernel's readiness is exact (level, EPOLLET, EPOLLONESHOT, epoll
// in epoll, sleeping waiters, POLLOUT only after a non-blocking connect completes) and
// these calls pass through. epoll_create*/epoll_ctl also record which epoll sets watch which
// managed descriptor, with what events and data (fd_table.h: why an upgrade needs that).
#include <poll.h>
#include <sys/select.h>
#include <time.h>

#include <cerrno>

#include "posix/runtime.h"
#include "posix/upgrade.h"
#include "rmsg/socket.h"

using namespace rmsg::posix;

namespace {

int new_epoll(Runtime* rt, int epfd) {
  if (epfd < 0 || rt == nullptr || foreign_process(*rt) || !start_tracking(*rt)) return epfd;
  drop(*rt, epfd);  // a stale entry for a number closed behind the shim's back
  rt->table.mark_epoll(epfd, rt->next_epoll_id.fetch_add(1, std::memory_order_relaxed));
  return epfd;
}

EpollRegistration* find(FdSlot& s, std::uint32_t id) {
  for (auto& r : s.registrations) {
    if (r.epoll_id.load(std::memory_order_acquire) == id) return &r;
  }
  return nullptr;
}

void record(Runtime& rt, int epfd, int op, int fd, const epoll_event* ev) {
  FdSlot* s = rt.table.slot(fd);
  if (s == nullptr || s->object.load(std::memory_order_acquire) == 0) return;
  FdSlot* e = rt.table.slot(epfd);
  std::uint32_t id = e == nullptr ? 0 : e->epoll_id.load(std::memory_order_acquire);
  if (id == 0) {  // a set the shim did not see made (inherited across exec, say)
    s->flags.fetch_or(kFdRegistrationsLost, std::memory_order_acq_rel);
    return;
  }
  EpollRegistration* r = find(*s, id);
  if (op == EPOLL_CTL_DEL) {
    if (r != nullptr) r->epoll_id.store(0, std::memory_order_release);
    return;
  }
  if (r == nullptr && op == EPOLL_CTL_ADD) {
    for (auto& free_one : s->registrations) {
      std::uint32_t zero = 0;
      if (free_one.epoll_id.compare_exchange_strong(zero, id, std::memory_order_acq_rel)) {
        r = &free_one;
        break;
      }
    }
  }
  if (r == nullptr) {
    s->flags.fetch_or(kFdRegistrationsLost, std::memory_order_acq_rel);
    return;
  }
  r->events.store(ev == nullptr ? 0 : ev->events, std::memory_order_release);
  r->data.store(ev == nullptr ? 0 : ev->data.u64, std::memory_order_release);
}

// poll and ppoll with upgraded connections in the set: each one's readiness eventfd is
// watched beside its TCP socket and folded into the socket's answer (docs/socket-shim.md,
// "Readiness"). *handled false when the set holds none (the caller then asks the kernel
// as is). On the stack, no allocation (the preload links nothing but libc): a set of more
// than kMaxFolded entries in all is the kernel's alone.
inline constexpr nfds_t kMaxFolded = 256;

template <typename Call>
int poll_upgraded(Runtime* rt, pollfd* fds, nfds_t nfds, Call call, bool* handled) {
  *handled = false;
  const UpgradeHooks* h = upgrade_hooks();
  if (rt == nullptr || h == nullptr || nfds > kMaxFolded) return 0;
  pollfd all[3 * kMaxFolded];
  nfds_t at[kMaxFolded];  // the entry each extra one belongs to
  UpgradeConn* conn[kMaxFolded];
  nfds_t extra = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    SocketObject* o = rt->table.object(fds[i].fd);
    UpgradeConn* c = o == nullptr ? nullptr : o->upgrade.load(std::memory_order_acquire);
    if (c == nullptr) continue;
    at[extra] = i;
    conn[extra] = c;
    ++extra;
  }
  if (extra == 0) return 0;
  *handled = true;
  for (;;) {
    for (nfds_t i = 0; i < nfds; ++i) all[i] = fds[i];
    // What the TCP socket still answers for: input before the read side's cut-over,
    // output before the write side's (after it, room in the send buffer).
    for (nfds_t k = 0; k < extra; ++k) {
      int in_fd = -1;
      int out_fd = -1;
      all[at[k]].events = h->poll_prepare(*conn[k], fds[at[k]].events, &in_fd, &out_fd);
      all[nfds + 2 * k] = pollfd{in_fd, POLLIN, 0};
      all[nfds + 2 * k + 1] = pollfd{out_fd, POLLOUT, 0};
    }
    int rc = call(all, nfds + 2 * extra);
    if (rc < 0) return rc;
    for (nfds_t i = 0; i < nfds; ++i) fds[i].revents = all[i].revents;
    for (nfds_t k = 0; k < extra; ++k) {
      bool in = (all[nfds + 2 * k].revents & POLLIN) != 0;
      bool out = (all[nfds + 2 * k + 1].revents & POLLOUT) != 0;
      fds[at[k]].revents = h->poll_result(*conn[k], fds[at[k]].events, all[at[k]].revents, in, out);
    }
    int ready = 0;
    for (nfds_t i = 0; i < nfds; ++i) ready += fds[i].revents != 0 ? 1 : 0;
    // A wake-up that carried nothing for the program (the eventfd drained): wait again.
    if (ready > 0 || rc == 0) return ready;
  }
}

bool is_upgraded(Runtime* rt, int fd) {
  SocketObject* o = rt->table.object(fd);
  return o != nullptr && o->upgrade.load(std::memory_order_acquire) != nullptr;
}

// select and pselect with an upgraded connection in a set: the sets become a poll set (the
// kernel's own mapping: readable is POLLIN, POLLHUP or POLLERR; writable POLLOUT or
// POLLERR; exceptional POLLPRI) that poll_upgraded folds, then sets again. *handled false
// when no upgraded connection is in the sets, or they name more than kMaxFolded numbers.
int select_upgraded(Runtime* rt, int nfds, fd_set* r, fd_set* w, fd_set* e, const timespec* ts,
                    const sigset_t* mask, bool* handled) {
  *handled = false;
  if (rt == nullptr || upgrade_hooks() == nullptr || nfds <= 0 || nfds > FD_SETSIZE) return 0;
  pollfd p[kMaxFolded];
  nfds_t n = 0;
  bool any = false;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (r != nullptr && FD_ISSET(fd, r)) ev |= POLLIN;
    if (w != nullptr && FD_ISSET(fd, w)) ev |= POLLOUT;
    if (e != nullptr && FD_ISSET(fd, e)) ev |= POLLPRI;
    if (ev == 0) continue;
    if (n == kMaxFolded) return 0;
    p[n++] = pollfd{fd, ev, 0};
    any = any || is_upgraded(rt, fd);
  }
  if (!any) return 0;
  *handled = true;
  bool folded = false;
  int rc = poll_upgraded(
      rt, p, n, [&](pollfd* f, nfds_t k) { return g_real.ppoll(f, k, ts, mask); }, &folded);
  if (rc < 0) return rc;
  for (nfds_t i = 0; i < n; ++i) {
    if ((p[i].revents & POLLNVAL) != 0) {
      errno = EBADF;
      return -1;
    }
  }
  int ready = 0;
  for (nfds_t i = 0; i < n; ++i) {
    int fd = p[i].fd;
    short got = p[i].revents;
    if (r != nullptr && FD_ISSET(fd, r)) {
      if ((got & (POLLIN | POLLHUP | POLLERR)) != 0) {
        ++ready;
      } else {
        FD_CLR(fd, r);
      }
    }
    if (w != nullptr && FD_ISSET(fd, w)) {
      if ((got & (POLLOUT | POLLERR)) != 0) {
        ++ready;
      } else {
        FD_CLR(fd, w);
      }
    }
    if (e != nullptr && FD_ISSET(fd, e)) {
      if ((got & POLLPRI) != 0) {
        ++ready;
      } else {
        FD_CLR(fd, e);
      }
    }
  }
  return ready;
}

int number_of_epoll(const Runtime& rt, std::uint32_t id) {
  for (int fd = 0; fd <= rt.table.max_fd_seen(); ++fd) {
    const FdSlot* s = rt.table.slot(fd);
    if (s != nullptr && s->epoll_id.load(std::memory_order_acquire) == id) return fd;
  }
  return -1;
}

timespec now_monotonic() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

}  // namespace

void rmsg::posix::mirror_recorded(Runtime& rt, int fd) {
  FdSlot* s = rt.table.slot(fd);
  SocketObject* o = rt.table.object(fd);
  UpgradeConn* c = o == nullptr ? nullptr : o->upgrade.load(std::memory_order_acquire);
  if (s == nullptr || c == nullptr) return;
  int saved = errno;
  for (auto& r : s->registrations) {
    std::uint32_t id = r.epoll_id.load(std::memory_order_acquire);
    int ep = id == 0 ? -1 : number_of_epoll(rt, id);
    if (ep < 0) continue;
    epoll_event ev{};
    ev.events = r.events.load(std::memory_order_acquire);
    ev.data.u64 = r.data.load(std::memory_order_acquire);
    upgrade_hooks()->epoll_mirror(*c, ep, EPOLL_CTL_ADD, fd, &ev);
  }
  errno = saved;
}

extern "C" {

int rmsg_poll(pollfd* fds, nfds_t nfds, int timeout) {
  Runtime* rt = runtime();
  bool handled = false;
  int rc = poll_upgraded(
      rt, fds, nfds, [&](pollfd* f, nfds_t n) { return g_real.poll(f, n, timeout); }, &handled);
  return handled ? rc : g_real.poll(fds, nfds, timeout);
}

int rmsg_ppoll(pollfd* fds, nfds_t nfds, const timespec* timeout, const sigset_t* mask) {
  Runtime* rt = runtime();
  bool handled = false;
  int rc = poll_upgraded(
      rt, fds, nfds, [&](pollfd* f, nfds_t n) { return g_real.ppoll(f, n, timeout, mask); },
      &handled);
  return handled ? rc : g_real.ppoll(fds, nfds, timeout, mask);
}

int rmsg_select(int nfds, fd_set* r, fd_set* w, fd_set* e, timeval* t) {
  Runtime* rt = runtime();
  if (t != nullptr && (t->tv_sec < 0 || t->tv_usec < 0)) return g_real.select(nfds, r, w, e, t);
  timespec ts{};
  if (t != nullptr) ts = timespec{t->tv_sec, static_cast<long>(t->tv_usec) * 1000};
  timespec start = t != nullptr ? now_monotonic() : timespec{};
  bool handled = false;
  int rc = select_upgraded(rt, nfds, r, w, e, t != nullptr ? &ts : nullptr, nullptr, &handled);
  if (!handled) return g_real.select(nfds, r, w, e, t);
  if (t != nullptr) {  // Linux's select leaves the time not slept in *t
    int saved = errno;
    timespec end = now_monotonic();
    long long left_us =
        (static_cast<long long>(t->tv_sec) * 1000000 + t->tv_usec) -
        ((end.tv_sec - start.tv_sec) * 1000000LL + (end.tv_nsec - start.tv_nsec) / 1000);
    if (left_us < 0 || rc == 0) left_us = 0;
    t->tv_sec = static_cast<time_t>(left_us / 1000000);
    t->tv_usec = static_cast<suseconds_t>(left_us % 1000000);
    errno = saved;
  }
  return rc;
}

int rmsg_pselect(int nfds, fd_set* r, fd_set* w, fd_set* e, const timespec* t,
                 const sigset_t* mask) {
  Runtime* rt = runtime();
  bool handled = false;
  int rc = select_upgraded(rt, nfds, r, w, e, t, mask, &handled);
  return handled ? rc : g_real.pselect(nfds, r, w, e, t, mask);
}

int rmsg_epoll_create(int size) {
  Runtime* rt = runtime();
  return new_epoll(rt, g_real.epoll_create(size));
}

int rmsg_epoll_create1(int flags) {
  Runtime* rt = runtime();
  return new_epoll(rt, g_real.epoll_create1(flags));
}

int rmsg_epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  Runtime* rt = runtime();
  int rc = g_real.epoll_ctl(epfd, op, fd, event);
  if (rc == 0 && rt != nullptr) {
    record(*rt, epfd, op, fd, event);
    SocketObject* o = rt->table.object(fd);
    UpgradeConn* c = o == nullptr ? nullptr : o->upgrade.load(std::memory_order_acquire);
    if (c != nullptr) {
      int saved = errno;
      upgrade_hooks()->epoll_mirror(*c, epfd, op, fd, event);
      errno = saved;
    }
  }
  return rc;
}

int rmsg_epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
  runtime();
  return g_real.epoll_wait(epfd, events, max, timeout);
}

int rmsg_epoll_pwait(int epfd, epoll_event* events, int max, int timeout, const sigset_t* mask) {
  runtime();
  return g_real.epoll_pwait(epfd, events, max, timeout, mask);
}

}  // extern "C"
