// Banner encoding and negotiation (banner.h). Decoding is the WireDecoder's first state.
#include "wire/banner.h"

#include <algorithm>
#include <cstring>

#include "wire/crc32c.h"
#include "wire/frame_bytes.h"
#include "wire/frame_errors.h"

namespace rmsg::wire {

std::array<std::byte, kBannerSize> encode_banner(const Banner& banner) noexcept {
  std::array<std::byte, kBannerSize> out{};
  std::memcpy(out.data(), kBannerMagic.data(), kBannerMagic.size());
  wire::store_le<std::uint16_t>(out.data() + 8, banner.version_min);
  wire::store_le<std::uint16_t>(out.data() + 10, banner.version_max);
  wire::store_le<std::uint16_t>(out.data() + 12, 0);  // no extension
  wire::store_le<std::uint16_t>(out.data() + 14, 0);
  wire::store_le<std::uint64_t>(out.data() + 16, banner.supported);
  wire::store_le<std::uint64_t>(out.data() + 24, banner.required);
  const auto crc = crc32c(std::span<const std::byte>(out.data(), kBannerFixedSize));
  wire::store_le<std::uint32_t>(out.data() + kBannerFixedSize, crc);
  return out;
}

std::vector<std::byte> encode_banner_ext(const Banner& banner) {
  if (!banner.auth) {
    const auto plain = encode_banner(banner);
    return {plain.begin(), plain.end()};
  }
  std::vector<std::byte> out(kBannerAuthSize);
  const auto plain = encode_banner(banner);
  std::memcpy(out.data(), plain.data(), kBannerFixedSize);
  constexpr std::size_t kExt = kBannerAuthSize - kBannerSize;
  wire::store_le<std::uint16_t>(out.data() + 12, kExt);
  std::byte* f = out.data() + kBannerFixedSize;
  f[0] = std::byte{kBannerFieldAuth};
  f[1] = std::byte{kBannerAuthValue};
  wire::store_le<std::uint64_t>(f + 2, banner.auth->node);
  std::memcpy(f + 10, banner.auth->nonce.data(), kBannerNonceSize);
  const std::size_t crc_at = kBannerFixedSize + kExt;
  wire::store_le<std::uint32_t>(out.data() + crc_at,
                                crc32c(std::span<const std::byte>(out.data(), crc_at)));
  return out;
}

Result<void> decode_banner_extension(std::span<const std::byte> ext, Banner& out) noexcept {
  out.auth.reset();
  while (!ext.empty()) {
    if (ext.size() < 2) return make_error_code(WireErrc::bad_banner);
    const auto type = std::to_integer<std::uint8_t>(ext[0]);
    const auto len = std::to_integer<std::size_t>(ext[1]);
    if (ext.size() < 2 + len) return make_error_code(WireErrc::bad_banner);
    if (type == kBannerFieldAuth) {
      if (len != kBannerAuthValue || out.auth) return make_error_code(WireErrc::bad_banner);
      BannerAuth a;
      a.node = wire::load_le<std::uint64_t>(ext.data() + 2);
      std::memcpy(a.nonce.data(), ext.data() + 10, kBannerNonceSize);
      out.auth = a;
    }
    ext = ext.subspan(2 + len);
  }
  return {};
}

std::uint64_t missing_features(const Banner& local, const Banner& peer) noexcept {
  return (local.required & ~peer.supported) | (peer.required & ~local.supported);
}

Result<Negotiated> negotiate(const Banner& local, const Banner& peer) noexcept {
  if (local.version_min > local.version_max || peer.version_min > peer.version_max) {
    return make_error_code(WireErrc::bad_banner);
  }
  const auto version = std::min(local.version_max, peer.version_max);
  if (version < std::max(local.version_min, peer.version_min)) {
    return make_error_code(WireErrc::bad_version);
  }
  if (missing_features(local, peer) != 0) return make_error_code(WireErrc::missing_features);
  return Negotiated{version, local.supported & peer.supported};
}

}  // namespace rmsg::wire
