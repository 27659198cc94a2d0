// Passive open: a listening socket watched on the loop; every accepted connection is
// handed on as a socket (tcp::listen_sockets) or as a Stream (tcp_listen).
#include "tcp/tcp_listener.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <memory>

#include "loop/alive.h"
#include "loop/loop_thread.h"
#include "rmsg/log.h"
#include "rmsg/tcp.h"
#include "tcp/tcp_stream.h"

namespace rmsg::tcp {
namespace {

using namespace std::chrono_literals;

// Accepting at most this many per wakeup keeps one busy listener from starving the
// other watchers of its loop.
constexpr int kAcceptBatch = 64;
// Out of descriptors: the pending connection stays readable forever, so stop watching
// for this long instead of spinning on EMFILE.
constexpr Duration kFdExhaustedPause = 100ms;

class TcpListener final : public ListenerImpl {
 public:
  TcpListener(EventLoop& loop, int fd, TcpOptions options, SocketCallback on_socket)
      : loop_(loop), fd_(fd), options_(options), on_socket_(std::move(on_socket)) {
    const auto name = local_name(fd);
    auto parsed = SocketAddress::parse(name);
    if (parsed) bound_ = *parsed;
  }
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;
  TcpListener(TcpListener&&) = delete;
  TcpListener& operator=(TcpListener&&) = delete;
  ~TcpListener() override { close(); }

  Result<void> start() {
    auto w = loop_.watch(fd_, kReadable, [this](std::uint32_t) { accept_batch(); });
    if (!w) return w.error();
    watch_ = *w;
    return {};
  }

  std::string local_address() const override { return bound_.to_string(); }
  std::uint16_t port() const override { return bound_.port(); }

  void close() override {
    if (fd_ < 0) return;
    RMSG_ASSERT_LOOP_THREAD(loop_);
    loop_.unwatch(watch_);
    watch_ = 0;
    if (pause_timer_ != 0) loop_.cancel_timer(pause_timer_);
    pause_timer_ = 0;
    close_socket(fd_, false);
    fd_ = -1;
  }

 private:
  void accept_batch() {
    const auto frame = alive_.token();
    for (int i = 0; i < kAcceptBatch && fd_ >= 0; ++i) {
      const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) pause();
        if (errno != EAGAIN) RMSG_LOG(warn, "tcp: accept: %s", errno_code(errno).message().c_str());
        break;
      }
      if (auto r = apply_options(fd, options_); !r) {
        RMSG_LOG(warn, "tcp: accepted socket options: %s", r.error().message().c_str());
        close_socket(fd, true);
        continue;
      }
      on_socket_(OwnedSocket(fd));
      if (!frame.alive()) return;  // the callback destroyed the listener
    }
  }

  void pause() {
    if (loop_.set_interest(watch_, 0).ok()) {
      pause_timer_ = loop_.add_timer(kFdExhaustedPause, [this] {
        pause_timer_ = 0;
        if (fd_ >= 0) static_cast<void>(loop_.set_interest(watch_, kReadable));
      });
    }
  }

  EventLoop& loop_;
  int fd_;
  TcpOptions options_;
  SocketCallback on_socket_;
  SocketAddress bound_;
  WatchId watch_ = 0;
  TimerId pause_timer_ = 0;
  // accept_batch() learns that the callback destroyed the listener, also after a nested
  // batch (a callback that runs the loop): each batch holds its own token (loop/alive.h).
  Alive<TcpListener> alive_{loop_, this};
};

}  // namespace

Result<Listener> listen_sockets(EventLoop& loop, const SocketAddress& address,
                                const TcpOptions& options, SocketCallback on_socket) {
  RMSG_ASSERT_LOOP_THREAD(loop);
  auto fd = tcp::open_socket(address);
  if (!fd) return fd.error();
  const int one = 1;
  // SO_REUSEADDR: a restarted server may bind while old connections sit in TIME_WAIT.
  if (::setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
      ::bind(*fd, address.sockaddr_ptr(), address.length()) < 0 ||
      ::listen(*fd, options.backlog) < 0) {
    const int err = errno;
    close_socket(*fd, false);
    return errno_code(err);
  }
  // Constructed after bind(), so that it records the port the kernel chose.
  auto listener = std::make_unique<TcpListener>(loop, *fd, options, std::move(on_socket));
  RMSG_TRY(listener->start());
  return Listener(std::move(listener));
}

}  // namespace rmsg::tcp

namespace rmsg {

Result<Listener> tcp_listen(EventLoop& loop, const SocketAddress& address,
                            const TcpOptions& options, AcceptCallback on_accept) {
  return tcp::listen_sockets(
      loop, address, options,
      [&loop, options, on_accept = std::move(on_accept)](tcp::OwnedSocket socket) {
        on_accept(tcp::make_stream(loop, socket.release(), options));
      });
}

}  // namespace rmsg
