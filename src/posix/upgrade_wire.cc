#include "posix/upgrade_wire.h"

#include <cstring>

namespace rmsg::posix::upgrade_wire {
namespace {

void put(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    p[i] = static_cast<std::uint8_t>(v & 0xff);
    v >>= 8;
  }
}

std::uint64_t get(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

void head(std::uint8_t* p, std::uint8_t type) {
  put(p, kMagic, 4);
  p[4] = kVersion;
  p[5] = type;
}

bool head_ok(const std::uint8_t* p, std::uint8_t type) {
  return get(p, 4) == kMagic && p[5] == type;
}

// 16 address bytes (IPv4 in the first 4) and the port, both network order as in the
// sockaddr.
void put_addr(std::uint8_t* addr, std::uint8_t* port, const sockaddr_in6& a) {
  if (a.sin6_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    std::memcpy(addr, &v4.sin_addr, 4);
    std::memcpy(port, &v4.sin_port, 2);
  } else {
    std::memcpy(addr, &a.sin6_addr, 16);
    std::memcpy(port, &a.sin6_port, 2);
  }
}

void get_addr(const std::uint8_t* addr, const std::uint8_t* port, int family, sockaddr_in6& a) {
  a = {};
  if (family == AF_INET) {
    auto& v4 = reinterpret_cast<sockaddr_in&>(a);
    v4.sin_family = AF_INET;
    std::memcpy(&v4.sin_addr, addr, 4);
    std::memcpy(&v4.sin_port, port, 2);
  } else {
    a.sin6_family = AF_INET6;
    std::memcpy(&a.sin6_addr, addr, 16);
    std::memcpy(&a.sin6_port, port, 2);
  }
}

}  // namespace

void encode(const Offer& o, std::span<std::uint8_t, kOfferSize> out) {
  std::uint8_t* p = out.data();
  std::memset(p, 0, kOfferSize);
  head(p, 1);
  put(p + 6, o.local.sin6_family == AF_INET ? 4 : 6, 2);
  put(p + 8, o.features, 4);
  put_addr(p + 12, p + 44, o.local);
  put_addr(p + 28, p + 46, o.peer);
  put(p + 48, o.offset, 8);
}

void encode(const Challenge& c, std::span<std::uint8_t, kChallengeSize> out) {
  std::uint8_t* p = out.data();
  std::memset(p, 0, kChallengeSize);
  head(p, 2);
  p[4] = c.version;
  p[6] = static_cast<std::uint8_t>(c.status);
  put(p + 8, c.features, 4);
  std::memcpy(p + 12, c.nonce.data(), kNonceSize);
}

void encode_cutover(std::uint64_t offset, std::span<std::uint8_t, kCutoverSize> out) {
  std::uint8_t* p = out.data();
  std::memset(p, 0, kCutoverSize);
  head(p, 3);
  put(p + 8, offset, 8);
}

std::optional<Offer> decode_offer(std::span<const std::uint8_t, kOfferSize> in) {
  const std::uint8_t* p = in.data();
  if (!head_ok(p, 1) || p[4] != kVersion) return std::nullopt;
  std::uint64_t family = get(p + 6, 2);
  if (family != 4 && family != 6) return std::nullopt;
  Offer o;
  o.features = static_cast<std::uint32_t>(get(p + 8, 4));
  get_addr(p + 12, p + 44, family == 4 ? AF_INET : AF_INET6, o.local);
  get_addr(p + 28, p + 46, family == 4 ? AF_INET : AF_INET6, o.peer);
  o.offset = get(p + 48, 8);
  return o;
}

std::optional<Challenge> decode_challenge(std::span<const std::uint8_t, kChallengeSize> in) {
  const std::uint8_t* p = in.data();
  if (!head_ok(p, 2)) return std::nullopt;
  Challenge c;
  c.version = p[4];
  c.status = p[4] == kVersion ? static_cast<Status>(p[6]) : Status::version;
  c.features = static_cast<std::uint32_t>(get(p + 8, 4));
  std::memcpy(c.nonce.data(), p + 12, kNonceSize);
  return c;
}

std::optional<std::uint64_t> decode_cutover(std::span<const std::uint8_t, kCutoverSize> in) {
  const std::uint8_t* p = in.data();
  if (!head_ok(p, 3) || p[4] != kVersion) return std::nullopt;
  return get(p + 8, 8);
}

}  // namespace rmsg::posix::upgrade_wire
