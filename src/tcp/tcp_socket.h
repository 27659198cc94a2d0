// Socket helpers shared by the TCP control path (connect, listen) and data path (stream).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <system_error>

#include "rmsg/address.h"
#include "rmsg/result.h"
#include "rmsg/tcp.h"

namespace rmsg::tcp {

// Maps a socket errno to the rmsg condition the Stream contract names (see rmsg/tcp.h);
// anything else stays an errno in the system category.
std::error_code map_errno(int err) noexcept;

// A non-blocking, close-on-exec TCP socket of the address's family.
Result<int> open_socket(const SocketAddress& address);

// Applies TCP_NODELAY and the buffer sizes. Fails with the setsockopt errno.
Result<void> apply_options(int fd, const TcpOptions& options);

// getsockname / getpeername as "ip:port" ("" when the socket has none).
std::string local_name(int fd);
std::string peer_name(int fd);

// Closes fd; with `abortive`, first sets SO_LINGER {1, 0} so that the kernel sends RST.
void close_socket(int fd, bool abortive) noexcept;

// Looking at what a peer sent without consuming it (a connection manager reads an accepted
// connection's first bytes to route it; cm/tcp_router.h):
// recv(MSG_PEEK | MSG_DONTWAIT) into buf: the count (0: the peer closed), Errc::would_block,
// or the errno (map_errno).
Result<std::size_t> peek(int fd, std::span<std::byte> buf) noexcept;
// SO_RCVLOWAT: epoll reports the socket readable only once `n` bytes are in (or at its end).
Result<void> set_rcvlowat(int fd, std::size_t n) noexcept;
// Whether the peer sent its FIN or the socket failed (no wait). A socket at end of stream
// is readable whatever SO_RCVLOWAT says.
bool hung_up(int fd) noexcept;

// A socket on its way somewhere (a task posted to another loop): closed abortively if it
// is dropped before release(), as when a loop is destroyed with the task still queued.
// Move-only; -1 is none.
class OwnedSocket {
 public:
  explicit OwnedSocket(int fd) noexcept : fd_(fd) {}
  OwnedSocket(OwnedSocket&& other) noexcept : fd_(other.release()) {}
  OwnedSocket& operator=(OwnedSocket&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  OwnedSocket(const OwnedSocket&) = delete;
  OwnedSocket& operator=(const OwnedSocket&) = delete;
  ~OwnedSocket() { reset(); }

  int get() const noexcept { return fd_; }

  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  void reset() noexcept {
    if (fd_ >= 0) close_socket(release(), true);
  }
  int fd_;
};

}  // namespace rmsg::tcp
