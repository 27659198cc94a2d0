#include "rmsg/address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace rmsg {

Result<SocketAddress> SocketAddress::from_host_port(std::string_view host, std::uint16_t port) {
  if (host.size() >= INET6_ADDRSTRLEN) return Errc::invalid_argument;
  char buf[INET6_ADDRSTRLEN] = {};
  std::memcpy(buf, host.data(), host.size());
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage_);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
  if (inet_pton(AF_INET, buf, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.len_ = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, buf, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.len_ = sizeof(sockaddr_in6);
  } else {
    return Errc::invalid_argument;
  }
  return a;
}

Result<SocketAddress> SocketAddress::parse(std::string_view text) {
  std::string_view host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Errc::invalid_argument;
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) return Errc::invalid_argument;
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  unsigned port = 0;
  const auto* end = port_text.data() + port_text.size();
  auto [ptr, ec] = std::from_chars(port_text.data(), end, port);
  if (port_text.empty() || ec != std::errc{} || ptr != end || port > 65535) {
    return Errc::invalid_argument;
  }
  return from_host_port(host, static_cast<std::uint16_t>(port));
}

SocketAddress SocketAddress::from_sockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  if (sa != nullptr && len > 0 && len <= sizeof(sockaddr_storage)) {
    std::memcpy(&a.storage_, sa, len);
    a.len_ = len;
  }
  return a;
}

std::uint16_t SocketAddress::port() const noexcept {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

void SocketAddress::set_port(std::uint16_t port) noexcept {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

std::string SocketAddress::host() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof buf);
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf,
              sizeof buf);
  }
  return buf;
}

// Appends into one string: `"[" + host()` (operator+ on a literal and a temporary) trips
// GCC 12's -Wrestrict false positive at -O3 (GCC bug 105329).
std::string SocketAddress::to_string() const {
  const bool v6 = family() == AF_INET6;
  std::string out;
  if (v6) out += '[';
  out += host();
  if (v6) out += ']';
  out += ':';
  out += std::to_string(port());
  return out;
}

bool operator==(const SocketAddress& a, const SocketAddress& b) noexcept {
  return a.len_ == b.len_ && std::memcmp(&a.storage_, &b.storage_, a.len_) == 0;
}

}  // namespace rmsg
