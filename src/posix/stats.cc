#include "posix/stats.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

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

void add_peer(Line& line, const sockaddr_in6& peer) {
  char host[INET6_ADDRSTRLEN] = "";
  std::uint16_t port = 0;
  if (peer.sin6_family == AF_INET) {
    sockaddr_in v4;
    std::memcpy(&v4, &peer, sizeof v4);
    inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
    port = ntohs(v4.sin_port);
  } else if (peer.sin6_family == AF_INET6) {
    inet_ntop(AF_INET6, &peer.sin6_addr, host, sizeof host);
    port = ntohs(peer.sin6_port);
  } else {
    line.add("null");
    return;
  }
  line.add("\"");
  if (peer.sin6_family == AF_INET6) line.add("[");
  line.add(host);
  if (peer.sin6_family == AF_INET6) line.add("]");
  line.add(":");
  line.add(std::uint64_t{port});
  line.add("\"");
}

const char* fallback_text(Fallback f) {
  switch (f) {
    case Fallback::none:
      return "null";
    case Fallback::rdma_not_built:
      return "\"rdma upgrade not built (TCP only)\"";
  }
  return "null";
}

// The owner reports; at close, not when it forked since it last touched the connection:
// it handed the connection to the child (an accept-then-fork server), which reports it
// once it uses it. At exit a connection still held is reported whatever forked.
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
  line.add(",\"transport\":\"tcp\",\"bytes_in\":");
  line.add(o.bytes_in.load(std::memory_order_relaxed));
  line.add(",\"bytes_out\":");
  line.add(o.bytes_out.load(std::memory_order_relaxed));
  line.add(",\"fallback\":");
  line.add(fallback_text(o.fallback.load(std::memory_order_relaxed)));
  line.add("}\n");
  if (line.n == sizeof line.buf) line.buf[line.n - 1] = '\n';
  int saved = errno;  // close() and exit must not see the report's errno
  [[maybe_unused]] ssize_t w = g_real.write(rt.stats_fd, line.buf, line.n);
  errno = saved;
}

}  // namespace

void report_closed(Runtime& rt, const SocketObject& o) {
  if (rt.stats_fd < 0 || !reportable(rt, o, false)) return;
  write_line(rt, o);
}

void report_open_connections(Runtime& rt) {
  if (rt.stats_fd < 0) return;
  std::uint32_t n = rt.table.objects_high_water();
  for (std::uint32_t i = 0; i < n; ++i) {
    const SocketObject& o = *rt.table.object_at(i);
    if (reportable(rt, o, true)) write_line(rt, o);
  }
}

}  // namespace rmsg::posix
