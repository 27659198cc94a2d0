// peek_hello: the first bytes of an inbound connection, read as far as the hello's sender.
#include "wire/hello_peek.h"

#include <algorithm>

#include "wire/banner.h"
#include "wire/frame.h"
#include "wire/frame_decoder.h"
#include "wire/frame_types.h"

namespace rmsg::wire {
namespace {

std::uint64_t le(std::span<const std::byte> b, std::size_t off, std::size_t len) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < len; ++i) v |= std::to_integer<std::uint64_t>(b[off + i]) << (8 * i);
  return v;
}

constexpr std::size_t kNodeField = 8;  // the hello's first field (docs/protocol.md)

// The banner in full (CRC, versions, required features), as the shard would check it:
// a banner the shard would refuse is refused now, not after the handshake timeout. The
// shard's authentication policy is its own: a banner that requires it passes here. A
// banner with the auth field names its sender there (`auth_node`), since such a connector
// sends its hello only after the proofs, which need the shard.
bool banner_acceptable(std::span<const std::byte> banner, NodeId& auth_node) {
  DecoderOptions o;
  o.local = Banner{.supported = kFeatureAuthenticated};
  WireDecoder dec(o);
  if (dec.feed(banner) != DecodeEvent::banner) return false;
  if (dec.peer_banner().auth) auth_node = dec.peer_banner().auth->node;
  return true;
}

}  // namespace

HelloPeek peek_hello(std::span<const std::byte> head) noexcept {
  using V = HelloPeek::Verdict;
  const std::size_t magic = std::min(head.size(), kBannerMagic.size());
  if (!std::equal(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(magic),
                  kBannerMagic.begin())) {
    return {V::malformed};
  }
  if (head.size() < kBannerSize) return {V::need_more, kBannerSize};
  const std::size_t ext = le(head, 12, 2);
  if (ext > kMaxBannerExtension) return {V::malformed};
  const std::size_t pre = kBannerSize + ext;  // the first frame's preamble
  NodeId auth_node = 0;
  if (head.size() >= pre) {
    if (!banner_acceptable(head.first(pre), auth_node)) return {V::malformed};
    if (auth_node != 0) return {V::node, 0, auth_node};
  }
  const std::size_t need = pre + kPreambleSize + kNodeField;
  if (head.size() < need) return {V::need_more, need};
  const auto type = static_cast<FrameType>(std::to_integer<std::uint8_t>(head[pre]));
  const std::size_t segments = std::to_integer<std::size_t>(head[pre + 2]);
  if ((type != FrameType::client_ident && type != FrameType::session_reconnect) || segments < 1 ||
      le(head, pre + 4, 4) < kNodeField) {
    return {V::malformed};
  }
  const NodeId node = le(head, pre + kPreambleSize, kNodeField);
  if (node == 0) return {V::malformed};
  return {V::node, 0, node};
}

std::size_t peek_hello_cap() noexcept {
  return kBannerSize + kMaxBannerExtension + kPreambleSize + kNodeField;
}

}  // namespace rmsg::wire
