#include "tcp/tcp_socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace rmsg::tcp {

std::error_code map_errno(int err) noexcept {
  switch (err) {
    case EAGAIN:
      return make_error_code(Errc::would_block);
    case ECONNREFUSED:
      return make_error_code(Errc::connection_refused);
    case ECONNRESET:
      return make_error_code(Errc::connection_reset);
    case EPIPE:
      return make_error_code(Errc::peer_closed);
    case ETIMEDOUT:
      return make_error_code(Errc::timeout);
    case ENETUNREACH:
    case EHOSTUNREACH:
      return make_error_code(Errc::unreachable);
    default:
      return errno_code(err);
  }
}

Result<int> open_socket(const SocketAddress& address) {
  if (!address.valid()) return Errc::invalid_argument;
  const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_code(errno);
  return fd;
}

Result<void> apply_options(int fd, const TcpOptions& options) {
  const int one = 1;
  if (options.nodelay && ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
    return errno_code(errno);
  }
  if (options.send_buffer > 0 && ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options.send_buffer,
                                              sizeof options.send_buffer) < 0) {
    return errno_code(errno);
  }
  if (options.recv_buffer > 0 && ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &options.recv_buffer,
                                              sizeof options.recv_buffer) < 0) {
    return errno_code(errno);
  }
  return {};
}

namespace {

template <class Getter>
std::string name_of(int fd, Getter getter) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getter(fd, reinterpret_cast<sockaddr*>(&ss), &len) < 0) return {};
  return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len).to_string();
}

}  // namespace

std::string local_name(int fd) {
  return name_of(fd, ::getsockname);
}
std::string peer_name(int fd) {
  return name_of(fd, ::getpeername);
}

void close_socket(int fd, bool abortive) noexcept {
  if (fd < 0) return;
  if (abortive) {
    const linger lg{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  ::close(fd);
}

Result<std::size_t> peek(int fd, std::span<std::byte> buf) noexcept {
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) return map_errno(errno);
  }
}

Result<void> set_rcvlowat(int fd, std::size_t n) noexcept {
  const int v = static_cast<int>(n);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) < 0) return errno_code(errno);
  return {};
}

bool hung_up(int fd) noexcept {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace rmsg::tcp
