#include "posix/stats.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "posix/private_fd.h"

namespace rmsg::posix {
namespace {

// A fixed buffer that drops what does not fit (a line is far shorter than it).
struct Line {
  char buf[320];
  std::size_t n = 0;
  void add(const char* s) {
    while (*s != '\0' && n < sizeof buf) buf[n++] = *s++;
  }
  void add(std::uint64_t v) {
    char digits[24];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (k > 0 && n < sizeof buf) buf[n++] = digits[--k];
  }
};

void add_ipv4(Line& line, const unsigned char* b) {
  for (int i = 0; i < 4; ++i) {
    if (i > 0) line.add(".");
    line.add(std::uint64_t{b[i]});
  }
}

void add_hex(Line& line, unsigned v) {
  char digits[5];
  int k = 0;
  do {
    digits[k++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  while (k > 0 && line.n < sizeof line.buf) line.buf[line.n++] = digits[--k];
}

// RFC 5952 text (the longest run of two or more zero groups as "::", IPv4-mapped as
// ::ffff:a.b.c.d), written here because inet_ntop formats with sprintf, which a signal
// handler may not call.
void add_ipv6(Line& line, const unsigned char* b) {
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(b, kMapped, sizeof kMapped) == 0) {
    line.add("::ffff:");
    add_ipv4(line, b + 12);
    return;
  }
  unsigned g[8];
  for (int i = 0; i < 8; ++i) g[i] = (unsigned{b[2 * i]} << 8) | b[2 * i + 1];
  int best = -1, best_len = 1;
  for (int i = 0; i < 8;) {
    int j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i > best_len) best = i, best_len = j - i;
    i = j == i ? i + 1 : j;
  }
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      line.add("::");
      i += best_len - 1;
      continue;
    }
    if (i > 0 && i != best + best_len) line.add(":");
    add_hex(line, g[i]);
  }
}

void add_peer(Line& line, const sockaddr_in6& peer) {
  if (peer.sin6_family == AF_INET) {
    sockaddr_in v4;
    std::memcpy(&v4, &peer, sizeof v4);
    line.add("\"");
    add_ipv4(line, reinterpret_cast<const unsigned char*>(&v4.sin_addr));
    line.add(":");
    line.add(std::uint64_t{ntohs(v4.sin_port)});
    line.add("\"");
  } else if (peer.sin6_family == AF_INET6) {
    line.add("\"[");
    add_ipv6(line, peer.sin6_addr.s6_addr);
    line.add("]:");
    line.add(std::uint64_t{ntohs(peer.sin6_port)});
    line.add("\"");
  } else {
    line.add("null");
  }
}

}  // namespace

const char* fallback_name(Fallback f) {
  static constexpr const char* kNames[kFallbackReasons] = {
      "none",    "not_built", "policy", "peer",   "no_device", "loopback", "address",
      "binding", "timeout",   "busy",   "bypass", "version",   "pending"};
  auto i = static_cast<std::uint32_t>(f);
  return i < kFallbackReasons ? kNames[i] : "unknown";
}

namespace {

// The owner reports; at close, not when it forked since it last touched the connection:
// it handed the connection to the child (an accept-then-fork server), which reports it
// once it uses it. At exit a connection still held is reported whatever forked.
// One write() of the line with SIGPIPE blocked: a pipe or FIFO whose reader left answers
// EPIPE, and the SIGPIPE the write raised is taken back unless one was already pending.
// Only system calls (async-signal-safe).
void write_quietly(int fd, const char* buf, std::size_t n) {
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  if (pthread_sigmask(SIG_BLOCK, &pipe_only, &old) != 0) return;
  bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  ssize_t w = g_real.write(fd, buf, n);
  if (w < 0 && errno == EPIPE && !was_pending) {
    timespec now{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

bool reportable(const Runtime& rt, const SocketObject& o, bool at_exit) {
  SocketState s = o.state.load(std::memory_order_acquire);
  if (s != SocketState::connected && s != SocketState::connecting) return false;
  int pid = rt.pid.load(std::memory_order_relaxed);
  if (o.owner_pid.load(std::memory_order_relaxed) != pid) return false;
  return at_exit || o.io_fork_epoch.load(std::memory_order_relaxed) ==
                        rt.fork_epoch.load(std::memory_order_relaxed);
}

void write_line(Runtime& rt, const SocketObject& o) {
  Line line;
  line.add("{\"pid\":");
  line.add(static_cast<std::uint64_t>(rt.pid.load(std::memory_order_relaxed)));
  line.add(",\"peer\":");
  add_peer(line, o.peer);
  line.add(o.on_rdma.load(std::memory_order_relaxed) ? ",\"transport\":\"rdma\""
                                                     : ",\"transport\":\"tcp\"");
  line.add(",\"bytes_in\":");
  line.add(o.bytes_in.load(std::memory_order_relaxed));
  line.add(",\"bytes_out\":");
  line.add(o.bytes_out.load(std::memory_order_relaxed));
  line.add(",\"rdma_bytes_in\":");
  line.add(o.rdma_bytes_in.load(std::memory_order_relaxed));
  line.add(",\"rdma_bytes_out\":");
  line.add(o.rdma_bytes_out.load(std::memory_order_relaxed));
  line.add(",\"upgrade_us\":");
  std::uint64_t us = o.upgrade_us.load(std::memory_order_relaxed);
  if (us == 0) {
    line.add("null");
  } else {
    line.add(us);
  }
  line.add(",\"fallback\":");
  Fallback f = o.fallback.load(std::memory_order_relaxed);
  if (f == Fallback::none) {
    line.add("null");
  } else {
    line.add("\"");
    line.add(fallback_name(f));
    line.add("\"");
  }
  line.add("}\n");
  if (line.n == sizeof line.buf) line.buf[line.n - 1] = '\n';
  int saved = errno;  // close() and exit must not see the report's errno
  int fd = checked_stats_fd(rt);
  if (fd >= 0) write_quietly(fd, line.buf, line.n);
  errno = saved;
}

// This process is the one the table belongs to. A _Fork() or raw fork child (no fork
// handlers ran, so the shim's pid is the parent's) and a vfork child that calls exit()
// report nothing: its lines would carry the parent's pid and connections.
bool owner_process(const Runtime& rt) {
  return static_cast<int>(syscall(SYS_getpid)) == rt.pid.load(std::memory_order_relaxed);
}

}  // namespace

std::size_t format_peer(const sockaddr_in6& peer, char* out, std::size_t cap) {
  Line line;
  add_peer(line, peer);
  std::size_t n = line.n < cap ? line.n : cap;
  std::memcpy(out, line.buf, n);
  return n;
}

void report_closed(Runtime& rt, const SocketObject& o) {
  if (rt.stats_fd.load(std::memory_order_acquire) < 0 || !reportable(rt, o, false)) return;
  if (!owner_process(rt)) return;
  write_line(rt, o);
}

void report_open_connections(Runtime& rt) {
  if (rt.stats_fd.load(std::memory_order_acquire) < 0 || !owner_process(rt)) return;
  int top = rt.table.max_fd_seen();
  for (int fd = 0; fd <= top; ++fd) settle_connect(rt, fd);
  std::uint32_t n = rt.table.objects_high_water();
  for (std::uint32_t i = 0; i < n; ++i) {
    const SocketObject& o = *rt.table.object_at(i);
    if (reportable(rt, o, true)) write_line(rt, o);
  }
}

}  // namespace rmsg::posix
