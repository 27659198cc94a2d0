// The baseline: the same protocol over plain blocking sockets (TCP_NODELAY), the server
// on a thread of its own that serves one connection at a time. It is what an application
// would write without rmsg, so rmsg's numbers are reported as a ratio against it.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "wire.h"

namespace rmsg::perf {
namespace {

using Clock = std::chrono::steady_clock;

// Sends or receives exactly len bytes; false on EOF or error (errno set, 0 for EOF).
bool send_all(int fd, const void* data, std::size_t len) {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

bool recv_all(int fd, void* data, std::size_t len) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      return false;
    }
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

std::error_code last_error() {
  return errno == 0 ? make_error_code(Errc::peer_closed) : errno_code(errno);
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void serve_connection(int fd) {
  WireHeader h;
  if (!recv_all(fd, &h, sizeof h) || !valid(h)) return;
  std::vector<char> buf(std::min<std::uint64_t>(h.size, 256 << 10));
  if (h.test == static_cast<std::uint32_t>(Test::lat)) {
    for (;;) {  // byte echo, like the stream server
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || !send_all(fd, buf.data(), static_cast<std::size_t>(n))) return;
    }
  }
  std::uint64_t left = h.size * h.count;
  while (left > 0) {
    const ssize_t n = ::recv(fd, buf.data(), std::min<std::uint64_t>(left, buf.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    left -= static_cast<std::uint64_t>(n);
  }
  const char ack = 1;
  if (!send_all(fd, &ack, 1)) return;
  while (::recv(fd, buf.data(), buf.size(), 0) > 0) {
  }
}

class PosixServer final : public Server {
 public:
  PosixServer(int fd, std::uint16_t port, const RunOptions& o) : fd_(fd), port_(port) {
    thread_ = std::thread([this, o] {
      pin_server_thread(o);
      for (;;) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          if (stop_.load()) return;
          std::this_thread::yield();  // EMFILE and friends: try again
          continue;
        }
        set_nodelay(c);
        serve_connection(c);
        ::close(c);
      }
    });
  }
  PosixServer(const PosixServer&) = delete;
  PosixServer& operator=(const PosixServer&) = delete;
  PosixServer(PosixServer&&) = delete;
  PosixServer& operator=(PosixServer&&) = delete;
  ~PosixServer() override {
    stop_.store(true);
    ::shutdown(fd_, SHUT_RDWR);  // makes the blocked accept() fail
    thread_.join();
    ::close(fd_);
  }
  std::uint16_t port() const override { return port_; }

 private:
  int fd_;
  std::uint16_t port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class PosixRunner final : public Runner {
 public:
  explicit PosixRunner(const RunOptions& o) : options_(o) {}
  std::string name() const override { return "posix"; }

  Result<std::unique_ptr<Server>> start_server(const SocketAddress& address) override {
    const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno_code(errno);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::bind(fd, address.sockaddr_ptr(), address.length()) < 0 || ::listen(fd, 64) < 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) {
      const int err = errno;
      ::close(fd);
      return errno_code(err);
    }
    const auto port = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len).port();
    return std::unique_ptr<Server>(std::make_unique<PosixServer>(fd, port, options_));
  }

  Result<Measurement> run(const SocketAddress& address, const Spec& spec,
                          Progress& progress) override {
    const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno_code(errno);
    auto r = run_on(fd, address, spec, progress);
    ::close(fd);
    return r;
  }

 private:
  static Result<Measurement> run_on(int fd, const SocketAddress& address, const Spec& spec,
                                    Progress& progress) {
    if (::connect(fd, address.sockaddr_ptr(), address.length()) < 0) return errno_code(errno);
    set_nodelay(fd);
    WireHeader h;
    h.test = static_cast<std::uint32_t>(spec.test);
    h.size = spec.size;
    h.count = spec.warmup + spec.iters;
    if (!send_all(fd, &h, sizeof h)) return last_error();
    std::vector<char> tx(spec.size, 0x5a);
    std::vector<char> rx(spec.size);
    Measurement m;
    m.samples_ns.reserve(spec.iters);
    auto start = Clock::now();
    auto last = start;
    for (std::uint64_t i = 0; i < h.count; ++i) {
      const auto t0 = Clock::now();
      if (i == spec.warmup) start = t0;
      if (!send_all(fd, tx.data(), tx.size())) return last_error();
      if (spec.test == Test::lat && !recv_all(fd, rx.data(), rx.size())) return last_error();
      const auto t1 = Clock::now();
      const auto ns = static_cast<double>((spec.test == Test::lat ? t1 - t0 : t1 - last).count());
      if (i >= spec.warmup) m.samples_ns.push_back(spec.test == Test::lat ? ns / 2 : ns);
      last = t1;
      progress.update(i + 1, h.count);
    }
    if (spec.test == Test::bw && !recv_all(fd, rx.data(), 1)) return last_error();
    m.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
    return m;
  }

 private:
  RunOptions options_;
};

std::unique_ptr<Runner> make_posix(const RunOptions& o) {
  return std::make_unique<PosixRunner>(o);
}
const bool kRegistered = register_runner("posix", make_posix);

}  // namespace
}  // namespace rmsg::perf
