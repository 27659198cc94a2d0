// The program side of an upgrading or upgraded connection: its data calls, shutdown and
// readiness (docs/socket-shim.md, "The data path after cut-over"). Before cut-over the
// bytes are the kernel's (counted so that the cut-over offsets are exact); reads wait in
// poll() on the TCP socket and the readiness eventfd, never inside the kernel's read, so
// that a change of path wakes them.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <vector>

#include "posix/upgrade.h"
#include "posix/upgrade_conn.h"

namespace rmsg::posix {
namespace {

bool nonblocking(int fd, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return true;
  int fl = g_engine_real->fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_NONBLOCK) != 0;
}

std::size_t total(const iovec* iov, int n) {
  std::size_t t = 0;
  for (int i = 0; i < n; ++i) t += iov[i].iov_len;
  return t;
}

using Clock = std::chrono::steady_clock;

// When a blocking call gives up (EAGAIN): the socket's SO_RCVTIMEO or SO_SNDTIMEO from the
// call's first wait; none when it is 0 (wait for ever). Read once per call, when it is
// about to wait.
class Deadline {
 public:
  explicit Deadline(int option) : option_(option) {}

  // False when the time is up: the call returns EAGAIN, as the kernel's does.
  bool before(int fd) {
    if (!known_) {
      known_ = true;
      timeval t{};
      socklen_t len = sizeof t;
      if (g_engine_real->getsockopt(fd, SOL_SOCKET, option_, &t, &len) == 0 &&
          (t.tv_sec != 0 || t.tv_usec != 0)) {
        limited_ = true;
        at_ = Clock::now() + std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
      }
    }
    return !limited_ || Clock::now() < at_;
  }
  int poll_ms() const {
    if (!limited_) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
  }
  void wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lock) const {
    if (limited_) {
      cv.wait_until(lock, at_);
    } else {
      cv.wait(lock);
    }
  }

 private:
  int option_;
  bool known_ = false;
  bool limited_ = false;
  Clock::time_point at_{};
};

// Waits (lock released) until the TCP socket or the eventfd is readable, or the deadline.
void wait_tcp_or_signal(UpgradeConn& c, std::unique_lock<std::mutex>& lock, const Deadline& d) {
  lock.unlock();
  pollfd p[2] = {{c.tcp_fd, POLLIN, 0}, {c.event_fd, POLLIN, 0}};
  g_engine_real->poll(p, 2, d.poll_ms());
  lock.lock();
  if (!readable_now(c)) drain_signal(c);
}

ssize_t timed_out() {
  errno = EAGAIN;
  return -1;
}

// RDMA bytes from rx into iov (MSG_PEEK leaves them).
ssize_t take_rx(UpgradeConn& c, const iovec* iov, int n, int flags) {
  std::size_t off = 0;
  for (int i = 0; i < n && off < c.rx.size(); ++i) {
    std::size_t k = std::min(iov[i].iov_len, c.rx.size() - off);
    std::memcpy(iov[i].iov_base, c.rx.data() + off, k);
    off += k;
  }
  if ((flags & MSG_PEEK) != 0) return static_cast<ssize_t>(off);
  bool was_full = c.rx_paused;
  c.rx.erase(0, off);
  if (c.obj != nullptr) {
    c.obj->bytes_in.fetch_add(off, std::memory_order_relaxed);
    c.obj->rdma_bytes_in.fetch_add(off, std::memory_order_relaxed);
    c.obj->on_rdma.store(true, std::memory_order_relaxed);
  }
  if (c.rx.empty() && !c.rx_eof && c.rx_error == 0) drain_signal(c);
  if (was_full && c.rx.size() < kBufferCap / 2) post_resume_reading(c);
  return static_cast<ssize_t>(off);
}

// Acceptor at the cut-over offset: are the next TCP bytes the nonce? Peeked, so a
// mismatch consumes nothing. 1: matched and consumed; 0: not all there yet; -1: mismatch.
int check_nonce(UpgradeConn& c) {
  std::uint8_t got[upgrade_wire::kNonceSize];
  ssize_t r = g_engine_real->recv(c.tcp_fd, got, sizeof got, MSG_PEEK | MSG_DONTWAIT);
  if (r <= 0) return r == 0 ? -1 : 0;  // end of stream before the nonce: refused
  if (std::memcmp(got, c.nonce.data(), static_cast<std::size_t>(r)) != 0) return -1;
  if (static_cast<std::size_t>(r) < sizeof got) return 0;
  ssize_t consumed = g_engine_real->recv(c.tcp_fd, got, sizeof got, MSG_DONTWAIT);
  return consumed == static_cast<ssize_t>(sizeof got) ? 1 : -1;
}

// One read: what is there now on the connection's current path (waiting for something
// when blocking), never across the cut-over offset (MSG_WAITALL is up_recv's).
ssize_t recv_once(UpgradeConn& c, const iovec* iov, int n, int flags, bool nb, Deadline& deadline) {
  std::unique_lock lock(c.mu);
  for (;;) {
    if (c.read_rdma) {
      if (!c.rx.empty()) return take_rx(c, iov, n, flags);
      if (c.rx_error != 0) {
        errno = c.rx_error;
        return -1;
      }
      if (c.rx_eof) return 0;
      if (nb) {
        drain_signal(c);  // nothing to read: a level-triggered wait must not fire again
        errno = EAGAIN;
        return -1;
      }
      if (!deadline.before(c.tcp_fd)) return timed_out();
      deadline.wait(c.cv, lock);
      continue;
    }
    std::uint64_t allowed = c.read_cap == kNoCap ? kNoCap : c.read_cap - c.tcp_in;
    if (allowed == 0) {
      if (c.verify_nonce) {
        int v = nonce_verdict(c);
        if (v != 0) {
          post_nonce_seen(c, v > 0);
          continue;
        }
      } else if (c.read_cap != kNoCap && !c.acceptor) {
        settle_routes(c);  // the connector read every TCP byte before the cut-over
        continue;
      }
      if (nb) {
        drain_signal(c);
        errno = EAGAIN;
        return -1;
      }
      if (!deadline.before(c.tcp_fd)) return timed_out();
      wait_tcp_or_signal(c, lock, deadline);
      continue;
    }
    // TCP bytes, at most up to the cap; the kernel's call never blocks here.
    iovec part[16];
    int k = 0;
    std::uint64_t left = allowed;
    for (int i = 0; i < n && k < 16 && left > 0; ++i) {
      std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(iov[i].iov_len, left));
      part[k++] = {iov[i].iov_base, len};
      left -= len;
    }
    msghdr m{};
    m.msg_iov = part;
    m.msg_iovlen = static_cast<std::size_t>(k);
    ++c.tcp_readers;
    lock.unlock();
    if (auto* w = g_tcp_read_window.load(std::memory_order_relaxed)) w();
    ssize_t r = g_engine_real->recvmsg(c.tcp_fd, &m, (flags & MSG_PEEK) | MSG_DONTWAIT);
    int err = errno;
    lock.lock();
    --c.tcp_readers;
    if (r > 0) {
      if ((flags & MSG_PEEK) == 0) {
        c.tcp_in += static_cast<std::uint64_t>(r);
        if (c.verify_nonce && c.tcp_in == c.read_cap) post_at_cap(c);
        if (c.obj != nullptr) {
          c.obj->bytes_in.fetch_add(static_cast<std::uint64_t>(r), std::memory_order_relaxed);
          c.obj->on_rdma.store(false, std::memory_order_relaxed);
        }
      }
      return r;
    }
    if (r == 0) return 0;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      errno = err;
      return -1;
    }
    if (nb) {
      drain_signal(c);
      errno = EAGAIN;
      return -1;
    }
    if (!deadline.before(c.tcp_fd)) return timed_out();
    wait_tcp_or_signal(c, lock, deadline);
  }
}

// MSG_WAITALL on a blocking socket fills the whole buffer across the cut-over offset (TCP
// bytes, then RDMA bytes) as the kernel's would across segments; end of stream, an error
// or SO_RCVTIMEO end it early with the bytes so far (or the error when there are none).
ssize_t up_recv(UpgradeConn& c, int /*fd*/, const iovec* iov, int n, int flags) {
  std::size_t want = total(iov, n);
  if (want == 0) return 0;
  bool nb = nonblocking(c.tcp_fd, flags);
  Deadline deadline(SO_RCVTIMEO);
  if ((flags & MSG_WAITALL) == 0 || (flags & MSG_PEEK) != 0 || nb) {
    return recv_once(c, iov, n, flags, nb, deadline);
  }
  std::vector<iovec> rest(iov, iov + n);
  std::size_t first = 0;  // rest[first..] is still to fill
  std::size_t got = 0;
  while (got < want) {
    ssize_t r = recv_once(c, rest.data() + first, static_cast<int>(rest.size() - first),
                          flags & ~MSG_WAITALL, false, deadline);
    if (r <= 0) return got > 0 ? static_cast<ssize_t>(got) : r;
    got += static_cast<std::size_t>(r);
    for (auto k = static_cast<std::size_t>(r); k > 0;) {
      std::size_t step = std::min(k, rest[first].iov_len);
      rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + step;
      rest[first].iov_len -= step;
      k -= step;
      if (rest[first].iov_len == 0 && first + 1 < rest.size()) ++first;
    }
  }
  return static_cast<ssize_t>(got);
}

ssize_t fail_write(int flags) {
  if ((flags & MSG_NOSIGNAL) == 0) raise(SIGPIPE);
  errno = EPIPE;
  return -1;
}

ssize_t up_send(UpgradeConn& c, int /*fd*/, const iovec* iov, int n, int flags) {
  std::size_t want = total(iov, n);
  bool nb = nonblocking(c.tcp_fd, flags);
  Deadline deadline(SO_SNDTIMEO);
  std::unique_lock lock(c.mu);
  for (;;) {
    if (c.shut_wr || c.write_failed) return fail_write(flags);
    if (c.wmode == WriteMode::tcp) {
      ++c.tcp_writers;
      lock.unlock();
      msghdr m{};
      m.msg_iov = const_cast<iovec*>(iov);
      m.msg_iovlen = static_cast<std::size_t>(n);
      ssize_t r = g_engine_real->sendmsg(c.tcp_fd, &m, flags);  // the same socket as fd
      int err = errno;
      lock.lock();
      if (r > 0) {
        c.tcp_out += static_cast<std::uint64_t>(r);
        if (c.obj != nullptr) {
          c.obj->bytes_out.fetch_add(static_cast<std::uint64_t>(r), std::memory_order_relaxed);
          c.obj->on_rdma.store(false, std::memory_order_relaxed);
        }
      }
      if (--c.tcp_writers == 0 && c.hold_waiting) post_writers_left(c);
      errno = err;
      return r;
    }
    if (c.wmode == WriteMode::rdma && c.tx.size() < kBufferCap) {
      std::size_t room = kBufferCap - c.tx.size();
      std::size_t put = 0;
      for (int i = 0; i < n && put < room; ++i) {
        std::size_t k = std::min(iov[i].iov_len, room - put);
        c.tx.append(static_cast<const char*>(iov[i].iov_base), k);
        put += k;
      }
      if (c.obj != nullptr) {
        c.obj->bytes_out.fetch_add(put, std::memory_order_relaxed);
        c.obj->rdma_bytes_out.fetch_add(put, std::memory_order_relaxed);
        c.obj->on_rdma.store(true, std::memory_order_relaxed);
      }
      settle_routes(c);  // a full tx takes EPOLLOUT away
      if (!c.flush_posted) {
        c.flush_posted = true;
        post_flush(c);
      }
      return static_cast<ssize_t>(put);
    }
    if (want == 0) return 0;
    settle_routes(c);  // held writes: output readiness is room_fd's from now
    if (nb || !deadline.before(c.tcp_fd)) return timed_out();
    deadline.wait(c.cv, lock);
  }
}

int up_shutdown(UpgradeConn& c, int /*fd*/, int how) {
  int rc = g_engine_real->shutdown(c.tcp_fd, how);  // the same socket as fd
  if (rc != 0) return rc;
  if (how == SHUT_WR || how == SHUT_RDWR) {
    std::unique_lock lock(c.mu);
    c.shut_wr = true;
    // A FIN on TCP ends an attempt that has not cut over the write side: the nonce could
    // no longer follow it. After cut-over the RDMA stream gets its FIN once tx is out.
    if (!c.flush_posted) {
      c.flush_posted = true;
      post_flush(c);
    }
  }
  return 0;
}

int up_readiness_fd(UpgradeConn& c) {
  return c.event_fd;
}

bool tcp_input_counts(const UpgradeConn& c) {
  return !c.read_rdma && (c.read_cap == kNoCap || c.tcp_in < c.read_cap || c.verify_nonce);
}

constexpr short kIn = POLLIN | POLLRDNORM;
constexpr short kOut = POLLOUT | POLLWRNORM;

// Before each poll: the path switches here as in a read (a connector that read every TCP
// byte before the cut-over), and the eventfd is set when the answer is known already (RDMA
// bytes that came while TCP was still the path, when nothing was signalled). TCP input
// counts until the cut-over offset, and at it while the acceptor waits for the nonce; TCP
// output until the write side left TCP (room_fd, writable while tx has room, from then).
short up_poll_prepare(UpgradeConn& c, short events, int* in_fd, int* out_fd) {
  std::lock_guard lock(c.mu);
  settle_routes(c);
  short ask = events;
  *in_fd = (events & kIn) != 0 ? c.event_fd : -1;
  *out_fd = -1;
  if (!tcp_input_counts(c)) ask = static_cast<short>(ask & ~kIn);
  if (readable_now(c)) signal_readers(c);
  if (c.wmode != WriteMode::tcp && (events & kOut) != 0) {
    ask = static_cast<short>(ask & ~kOut);
    *out_fd = c.room_fd;
  }
  return ask;
}

// Input is reported only when a read would find something: a program that reads a
// blocking socket after poll said readable (iperf3's control connection) would otherwise
// sleep in that read until the peer's next bytes. At the cut-over offset the TCP bytes
// past it are the nonce, not the program's: the verdict is settled here, as a read would.
short up_poll_result(UpgradeConn& c, short events, short tcp_revents, bool in, bool /*out*/) {
  std::lock_guard lock(c.mu);
  short out = tcp_revents;
  if (!c.read_rdma && c.read_cap != kNoCap && c.tcp_in == c.read_cap) {
    if (c.verify_nonce && (tcp_revents & kIn) != 0) {
      int v = nonce_verdict(c);
      if (v != 0) post_nonce_seen(c, v > 0);
    } else if (!c.acceptor) {
      c.read_rdma = true;  // the connector read every TCP byte before the cut-over
    }
    if (!c.read_rdma && c.read_cap != kNoCap) out = static_cast<short>(out & ~kIn);
  }
  if (!tcp_input_counts(c)) {
    out = static_cast<short>(out & ~kIn);
    if (readable_now(c)) {
      out = static_cast<short>(out | (events & kIn));
    } else if (in) {
      drain_signal(c);  // stale: nothing to read
    }
  } else if (in) {
    drain_signal(c);  // a change of state with nothing to read yet (the kernel's answer stands)
  }
  if (c.wmode != WriteMode::tcp) {
    out = static_cast<short>(out & ~kOut);
    if (writable_now(c)) out = static_cast<short>(out | (events & kOut));
  }
  return out;
}

void up_epoll_mirror(UpgradeConn& c, int epfd, int op, int fd, const epoll_event* ev) {
  std::lock_guard lock(c.mu);
  mirror_ctl(c, epfd, op, fd, ev);
}

void up_closing(UpgradeConn& c, int /*fd*/) {
  std::lock_guard lock(c.mu);
  unmirror_all(c);
}

}  // namespace

int nonce_verdict(UpgradeConn& c) {
  int v = check_nonce(c);
  if (v == 0) return 0;
  c.verify_nonce = false;
  if (v > 0) {
    c.read_rdma = true;
  } else {
    // Refused now, not when the loop gets to it: the program may ask at once.
    c.read_cap = kNoCap;
    c.result = Fallback::binding;
    if (c.obj != nullptr) c.obj->fallback.store(Fallback::binding, std::memory_order_relaxed);
  }
  signal_readers(c);
  return v;
}

// Before input moved to the eventfd it says "something changed" (a poller asks again);
// after, it is level: set only while a read would not block.
void signal_readers(UpgradeConn& c) {
  settle_routes(c);
  if (c.in_route == Route::tcp || readable_now(c)) {
    std::uint64_t one = 1;
    [[maybe_unused]] ssize_t w = g_engine_real->write(c.event_fd, &one, sizeof one);
  }
  c.cv.notify_all();
}

void signal_room(UpgradeConn& c) {
  settle_routes(c);
  c.cv.notify_all();
}

void drain_signal(UpgradeConn& c) {
  std::uint64_t v = 0;
  [[maybe_unused]] ssize_t r = g_engine_real->read(c.event_fd, &v, sizeof v);
}

const UpgradeHooks kUpgradeHooks{
    &upgrade_listening, &upgrade_established, &upgrade_connecting, &up_recv,
    &up_send,           &up_shutdown,         &up_readiness_fd,    &up_poll_prepare,
    &up_poll_result,    &up_epoll_mirror,     &up_closing,         &upgrade_closed};

}  // namespace rmsg::posix
