// SocketAddress: a numeric IPv4 or IPv6 address with a port. Parsing never performs a
// name lookup (nothing blocks a loop thread): "127.0.0.1:7000", "[::1]:7000".
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "rmsg/export.h"
#include "rmsg/result.h"

namespace rmsg {

class RMSG_EXPORT SocketAddress {
 public:
  SocketAddress() = default;
  // "a.b.c.d:port" or "[v6]:port". Errors: Errc::invalid_argument.
  static Result<SocketAddress> parse(std::string_view text);
  // A numeric host without port, plus a port.
  static Result<SocketAddress> from_host_port(std::string_view host, std::uint16_t port);
  static SocketAddress from_sockaddr(const sockaddr* sa, socklen_t len);

  const sockaddr* sockaddr_ptr() const noexcept {
    return reinterpret_cast<const sockaddr*>(&storage_);
  }
  sockaddr* sockaddr_ptr() noexcept { return reinterpret_cast<sockaddr*>(&storage_); }
  socklen_t length() const noexcept { return len_; }
  int family() const noexcept { return storage_.ss_family; }
  std::uint16_t port() const noexcept;
  void set_port(std::uint16_t port) noexcept;
  std::string host() const;       // numeric, without brackets
  std::string to_string() const;  // "host:port" / "[host]:port"
  bool valid() const noexcept { return len_ != 0; }

  friend bool operator==(const SocketAddress& a, const SocketAddress& b) noexcept;

 private:
  sockaddr_storage storage_{};
  socklen_t len_ = 0;
};

}  // namespace rmsg
