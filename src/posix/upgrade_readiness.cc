// Where an upgrading connection's readiness lives (docs/socket-shim.md, "Readiness lives in
// a shim-owned eventfd"): each direction's Route, the program's epoll registrations the
// engine mirrors onto its eventfds, and room_fd's counter. Everything here runs under the
// connection's mu, on a program thread or the engine's loop; the epoll_ctl calls are the
// C library's (g_engine_real), never the shim's.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "posix/upgrade_conn.h"

namespace rmsg::posix {
namespace {

constexpr std::uint32_t kInBits = EPOLLIN | EPOLLRDNORM | EPOLLRDBAND | EPOLLPRI | EPOLLRDHUP;
constexpr std::uint32_t kOutBits = EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND;
// The bits the kernel keeps when an EPOLLONESHOT entry fires (its EP_PRIVATE_BITS).
constexpr std::uint32_t kFlagBits = EPOLLET | EPOLLONESHOT | EPOLLWAKEUP | EPOLLEXCLUSIVE;
constexpr std::uint64_t kRoomBlocked = 0xfffffffffffffffeULL;  // an eventfd's maximum

bool has_events(std::uint32_t mask) {
  return (mask & ~kFlagBits) != 0;
}

// One line of /proc/self/fdinfo/EPFD ("tfd: N events: MASK data: ..."): an entry of the
// registration's whose mask the kernel cut to the flag bits, as it does when an
// EPOLLONESHOT entry fires.
bool fired_entry(const UpgradeConn& c, const MirroredReg& r, const char* line) {
  int tfd = -1;
  unsigned events = 0;
  if (std::sscanf(line, "tfd: %d events: %x", &tfd, &events) != 2) return false;
  std::uint32_t gave = tfd == r.fd         ? r.fd_mask
                       : tfd == c.event_fd ? r.in_mask
                       : tfd == c.room_fd  ? r.room_mask
                                           : 0;
  return has_events(gave) && !has_events(events);
}

// Whether one of the registration's EPOLLONESHOT entries fired since it was last armed
// (one fired entry disarms the registration). The file is read line by line: a set may
// hold thousands of entries.
bool fired(const UpgradeConn& c, const MirroredReg& r) {
  char path[48];
  std::snprintf(path, sizeof path, "/proc/self/fdinfo/%d", r.epfd);
  int f = ::open(path, O_RDONLY | O_CLOEXEC);
  if (f < 0) return false;
  char buf[4096];
  std::size_t have = 0;
  bool hit = false;
  for (;;) {
    ssize_t n = g_engine_real->read(f, buf + have, sizeof buf - 1 - have);
    if (n <= 0) break;
    have += static_cast<std::size_t>(n);
    buf[have] = '\0';
    char* line = buf;
    for (char* nl = nullptr; (nl = std::strchr(line, '\n')) != nullptr; line = nl + 1) {
      *nl = '\0';
      hit = hit || fired_entry(c, r, line);
    }
    have = static_cast<std::size_t>(buf + have - line);
    std::memmove(buf, line, have);
    if (have == sizeof buf - 1) have = 0;  // longer than any entry's line
  }
  g_engine_real->close(f);
  return hit;
}

// One entry of the registration's set to `want` (0: not in the set), from `had`.
void put(int epfd, int fd, std::uint32_t& had, std::uint32_t want, std::uint64_t data, bool force) {
  if ((want == had && !force) || (want == 0 && had == 0)) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = data;
  int op = want == 0 ? EPOLL_CTL_DEL : had == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  if (g_engine_real->epoll_ctl(epfd, op, fd, &ev) == 0 || op == EPOLL_CTL_DEL) had = want;
}

// Gives the kernel the registration's entries for the current routes: the program's
// number keeps the events no eventfd carries, event_fd carries input once input moved,
// room_fd output once output moved. A disarmed EPOLLONESHOT registration stays disarmed
// (its eventfd entries with the flag bits only, which an eventfd never fires; the kernel
// adds EPOLLERR|EPOLLHUP to the socket's entry at every MOD, so a TCP error or hang-up
// still reports); `force`: the program's MOD may have changed its data.
void apply(UpgradeConn& c, MirroredReg& r, bool armed, bool force) {
  std::uint32_t flags = r.events & (EPOLLET | EPOLLONESHOT);
  std::uint32_t on_fd = r.events & ~EPOLLEXCLUSIVE;  // MOD refuses EPOLLEXCLUSIVE
  std::uint32_t in = 0;
  std::uint32_t out = 0;
  if (c.in_route == Route::engine) {
    on_fd &= ~kInBits;
    if ((r.events & (EPOLLIN | EPOLLRDNORM)) != 0)
      in = (r.events & (EPOLLIN | EPOLLRDNORM)) | flags;
  }
  if (c.out_route == Route::engine) {
    on_fd &= ~kOutBits;
    if ((r.events & (EPOLLOUT | EPOLLWRNORM)) != 0) {
      out = (r.events & (EPOLLOUT | EPOLLWRNORM)) | flags;
    }
  }
  if (!armed) {
    on_fd = flags;
    if (in != 0) in = flags;
    if (out != 0) out = flags;
  }
  // With no event of the program's left, the socket's entry would still report the
  // kernel's EPOLLERR/EPOLLHUP (added at every MOD) level-triggered: a TCP connection shut
  // down both ways while RDMA bytes are still on their way would spin a level reader.
  // One-shot, it wakes the program once (its read then says what the logical stream has).
  if (!has_events(on_fd)) on_fd |= EPOLLONESHOT;
  // The program's number has its entry already (its own epoll_ctl): it is only changed.
  if (on_fd != r.fd_mask) {
    epoll_event ev{};
    ev.events = on_fd;
    ev.data.u64 = r.data;
    if (g_engine_real->epoll_ctl(r.epfd, EPOLL_CTL_MOD, r.fd, &ev) == 0) r.fd_mask = on_fd;
  }
  put(r.epfd, c.event_fd, r.in_mask, in, r.data, force && in != 0);
  put(r.epfd, c.room_fd, r.room_mask, out, r.data, force && out != 0);
}

// Whether the program's number r.fd still names the connection's socket: a registration
// under a number the program closed while another number kept the socket open (the core
// reports only the last close) must not touch whatever the number names now.
bool still_ours(const UpgradeConn& c, const MirroredReg& r) {
  struct stat a {};
  struct stat b {};
  return ::fstat(r.fd, &a) == 0 && ::fstat(c.tcp_fd, &b) == 0 && a.st_ino == b.st_ino &&
         a.st_dev == b.st_dev;
}

void sync_room(UpgradeConn& c) {
  bool room = c.wmode == WriteMode::tcp || writable_now(c);
  if (room != c.room_blocked) return;
  std::uint64_t v = kRoomBlocked;
  if (room) {
    [[maybe_unused]] ssize_t r = g_engine_real->read(c.room_fd, &v, sizeof v);
  } else {
    [[maybe_unused]] ssize_t w = g_engine_real->write(c.room_fd, &v, sizeof v);
  }
  c.room_blocked = !room;
}

}  // namespace

bool readable_now(const UpgradeConn& c) {
  return c.read_rdma && (!c.rx.empty() || c.rx_eof || c.rx_error != 0);
}

bool writable_now(const UpgradeConn& c) {
  return c.wmode == WriteMode::rdma && (c.tx.size() < kBufferCap || c.write_failed || c.shut_wr);
}

void settle_routes(UpgradeConn& c) {
  if (!c.read_rdma && !c.acceptor && c.read_cap != kNoCap && c.tcp_in == c.read_cap) {
    c.read_rdma = true;  // the connector read every TCP byte before the cut-over
  }
  Route in = c.read_rdma ? Route::engine : Route::tcp;
  Route out = c.wmode == WriteMode::tcp ? Route::tcp : Route::engine;
  bool moved = false;
  if (in != c.in_route && valid_route_move(c.in_route, in, true)) {
    // event_fd said "something changed" to pollers until now; from here it is level: set
    // exactly while a read would not block.
    std::uint64_t v = 1;
    if (readable_now(c)) {
      [[maybe_unused]] ssize_t w = g_engine_real->write(c.event_fd, &v, sizeof v);
    } else {
      [[maybe_unused]] ssize_t r = g_engine_real->read(c.event_fd, &v, sizeof v);
    }
    c.in_route = in;
    moved = true;
  }
  sync_room(c);  // before output moves: room_fd enters the sets with its true state
  if (out != c.out_route && valid_route_move(c.out_route, out, false)) {
    c.out_route = out;
    moved = true;
  }
  if (!moved) return;
  for (MirroredReg& r : c.regs) {
    if (r.epfd < 0) continue;
    if (!still_ours(c, r)) {
      put(r.epfd, c.event_fd, r.in_mask, 0, 0, false);
      put(r.epfd, c.room_fd, r.room_mask, 0, 0, false);
      r = MirroredReg{};
      continue;
    }
    if ((r.events & EPOLLONESHOT) != 0 && !r.disarmed) r.disarmed = fired(c, r);
    apply(c, r, !r.disarmed, false);
  }
}

void mirror_ctl(UpgradeConn& c, int epfd, int op, int fd, const epoll_event* ev) {
  MirroredReg* r = nullptr;
  MirroredReg* free_one = nullptr;
  for (MirroredReg& m : c.regs) {
    if (m.epfd == epfd && m.fd == fd) r = &m;
    if (m.epfd < 0 && free_one == nullptr) free_one = &m;
  }
  if (op == EPOLL_CTL_DEL) {
    if (r == nullptr) return;
    put(epfd, c.event_fd, r->in_mask, 0, 0, false);
    put(epfd, c.room_fd, r->room_mask, 0, 0, false);
    *r = MirroredReg{};
    return;
  }
  if (r == nullptr) {
    if (op != EPOLL_CTL_ADD || free_one == nullptr) return;
    r = free_one;
    r->epfd = epfd;
    r->fd = fd;
  }
  r->events = ev == nullptr ? 0 : ev->events;
  r->data = ev == nullptr ? 0 : ev->data.u64;
  r->fd_mask = r->events;  // what the program's own call just gave the kernel
  r->disarmed = false;
  apply(c, *r, true, op == EPOLL_CTL_MOD);
}

void unmirror_all(UpgradeConn& c) {
  for (MirroredReg& r : c.regs) {
    if (r.epfd < 0) continue;
    g_engine_real->epoll_ctl(r.epfd, EPOLL_CTL_DEL, r.fd, nullptr);
    put(r.epfd, c.event_fd, r.in_mask, 0, 0, false);
    put(r.epfd, c.room_fd, r.room_mask, 0, 0, false);
    r = MirroredReg{};
  }
}

}  // namespace rmsg::posix
