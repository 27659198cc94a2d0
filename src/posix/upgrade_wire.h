// The records two socket shims exchange at the start of an upgrade's RDMA stream
// (docs/protocol.md, "Socket shim upgrade"): OFFER, CHALLENGE, CUTOVER. Big-endian.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace rmsg::posix::upgrade_wire {

inline constexpr std::uint32_t kMagic = 0x524D5355;  // "RMSU"
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kOfferSize = 64;
inline constexpr std::size_t kChallengeSize = 32;
inline constexpr std::size_t kCutoverSize = 16;
inline constexpr std::size_t kNonceSize = 16;
using Nonce = std::array<std::uint8_t, kNonceSize>;

enum class Status : std::uint8_t {
  ok = 0,
  version = 1,
  malformed = 2,
  address = 3,
  busy = 4,
  policy = 5
};

struct Offer {
  std::uint32_t features = 0;
  sockaddr_in6 local{};      // the connector's TCP local end (AF_INET: the sockaddr_in prefix)
  sockaddr_in6 peer{};       // the connector's TCP peer
  std::uint64_t offset = 0;  // N_c
};

struct Challenge {
  Status status = Status::ok;
  std::uint8_t version = kVersion;
  std::uint32_t features = 0;
  Nonce nonce{};
};

void encode(const Offer& o, std::span<std::uint8_t, kOfferSize> out);
void encode(const Challenge& c, std::span<std::uint8_t, kChallengeSize> out);
void encode_cutover(std::uint64_t offset, std::span<std::uint8_t, kCutoverSize> out);

// Null when the bytes are not a well-formed record of that type and version 1 (a
// CHALLENGE of another version decodes, with status `version`).
std::optional<Offer> decode_offer(std::span<const std::uint8_t, kOfferSize> in);
std::optional<Challenge> decode_challenge(std::span<const std::uint8_t, kChallengeSize> in);
std::optional<std::uint64_t> decode_cutover(std::span<const std::uint8_t, kCutoverSize> in);

}  // namespace rmsg::posix::upgrade_wire
