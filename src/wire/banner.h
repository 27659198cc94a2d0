// The messenger banner: the first bytes each side sends on a new connection
// (docs/protocol.md, Messenger: banner). 36 bytes, little-endian:
//  off size field
//   0   8   magic "rmsg-msg"
//   8   2   lowest messenger protocol version the sender speaks
//  10   2   highest version the sender speaks (>= the lowest)
//  12   2   extension length E (bytes after the fixed part; <= kMaxBannerExtension; sent 0)
//  14   2   reserved, sent 0, ignored
//  16   8   supported feature bits
//  24   8   required feature bits (a subset of supported)
//  32   E   extension: fields of type (1 byte), length (1 byte), value; this version knows
//           type 1, auth (40 bytes: the sender's node id, u64, and a fresh 32-byte nonce),
//           sent with feature bit 0 (authenticated), and skips the others
//  32+E 4   CRC32C of every byte before it
//
// Exchange: each side writes its banner as soon as the stream is connected, without waiting
// for the peer's, then reads the peer's; 36 bytes fit any socket buffer or RDMA ring, so
// neither side can block the other and no round trip is spent. Each side then computes
// negotiate() from the two banners; both reach the same answer because it is symmetric:
//   version  = min(both highest), valid when >= max(both lowest)    else bad_version
//   features = supported & peer.supported; every required bit of either side must be in
//              the other's supported set                           else missing_features
// A side that fails closes the connection after reporting the error; the peer computes the
// same failure from the same banners, so it needs no reply frame to learn why.
//
// Threading: any thread; pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "rmsg/result.h"

namespace rmsg::wire {

inline constexpr std::array<std::byte, 8> kBannerMagic = {
    std::byte{'r'}, std::byte{'m'}, std::byte{'s'}, std::byte{'g'},
    std::byte{'-'}, std::byte{'m'}, std::byte{'s'}, std::byte{'g'}};
inline constexpr std::size_t kBannerFixedSize = 32;               // up to the extension
inline constexpr std::size_t kBannerSize = kBannerFixedSize + 4;  // as this version sends it
inline constexpr std::size_t kMaxBannerExtension = 256;
inline constexpr std::uint16_t kProtocolVersion = 1;  // the messenger protocol, this build

// Feature bit 0: an authentication exchange follows the banners (docs/protocol.md).
inline constexpr std::uint64_t kFeatureAuthenticated = 1;
inline constexpr std::uint8_t kBannerFieldAuth = 1;  // extension field type
inline constexpr std::size_t kBannerNonceSize = 32;
inline constexpr std::size_t kBannerAuthValue = 8 + kBannerNonceSize;
inline constexpr std::size_t kBannerAuthSize = kBannerSize + 2 + kBannerAuthValue;

// The extension's auth field: who the sender claims to be (for routing only: the proof
// that follows authenticates it) and its fresh nonce.
struct BannerAuth {
  std::uint64_t node = 0;
  std::array<std::byte, kBannerNonceSize> nonce{};
};

struct Banner {
  std::uint16_t version_min = kProtocolVersion;
  std::uint16_t version_max = kProtocolVersion;
  std::uint64_t supported = 0;
  std::uint64_t required = 0;
  std::optional<BannerAuth> auth{};  // the extension's auth field (decoded when present)
};

struct Negotiated {
  std::uint16_t version = 0;
  std::uint64_t features = 0;  // bits both sides support
};

// Without the extension (`auth` is not encoded).
std::array<std::byte, kBannerSize> encode_banner(const Banner& banner) noexcept;
// With the auth field when `banner.auth` is set (kBannerAuthSize bytes), else as above.
std::vector<std::byte> encode_banner_ext(const Banner& banner);
// The extension's fields (bytes 32 .. 32+E): the auth field into `out`. A field running
// past the end, a second auth field or one of another length is bad_banner.
Result<void> decode_banner_extension(std::span<const std::byte> ext, Banner& out) noexcept;

// The outcome of two banners (either order gives the same result): bad_version or
// missing_features (WireErrc) when the two cannot talk; a banner whose lowest version
// exceeds its highest is bad_banner.
Result<Negotiated> negotiate(const Banner& local, const Banner& peer) noexcept;

// The feature bits one side requires and the other lacks (for the log line).
std::uint64_t missing_features(const Banner& local, const Banner& peer) noexcept;

}  // namespace rmsg::wire
