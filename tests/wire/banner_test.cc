// The banner: its bytes, version negotiation and feature checks (either order gives the
// same answer), and the decoder's banner states (magic first, extension bounded, CRC).
#include "wire/banner.h"

#include <cstring>

#include <gtest/gtest.h>

#include "wire/crc32c.h"
#include "wire/frame_bytes.h"
#include "wire/frame_errors.h"
#include "wire/wire_test_util.h"

namespace rmsg::wire {
namespace {

using wire_test::append;
using wire_test::bytes_of;
using wire_test::decode_all;

Banner banner(std::uint16_t lo, std::uint16_t hi, std::uint64_t sup = 0, std::uint64_t req = 0) {
  return Banner{lo, hi, sup, req};
}

TEST(Banner, BytesAreAsDocumented) {
  const auto b = encode_banner(banner(1, 3, 0x0102030405060708, 0x8));
  ASSERT_EQ(b.size(), 36u);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(b.data()), 8), "rmsg-msg");
  EXPECT_EQ(wire::load_le<std::uint16_t>(b.data() + 8), 1);
  EXPECT_EQ(wire::load_le<std::uint16_t>(b.data() + 10), 3);
  EXPECT_EQ(wire::load_le<std::uint16_t>(b.data() + 12), 0);  // no extension
  EXPECT_EQ(b[16], std::byte{0x08});                          // little-endian
  EXPECT_EQ(wire::load_le<std::uint64_t>(b.data() + 16), 0x0102030405060708u);
  EXPECT_EQ(wire::load_le<std::uint64_t>(b.data() + 24), 0x8u);
  EXPECT_EQ(wire::load_le<std::uint32_t>(b.data() + 32),
            crc32c(std::span<const std::byte>(b.data(), 32)));
}

void expect_symmetric(const Banner& a, const Banner& b, WireErrc want) {
  const auto ab = negotiate(a, b);
  const auto ba = negotiate(b, a);
  EXPECT_EQ(ab.error(), make_error_code(want));
  EXPECT_EQ(ba.error(), make_error_code(want));
}

TEST(Banner, NegotiatesHighestCommonVersionAndCommonFeatures) {
  const auto n = negotiate(banner(1, 3, 0b1110), banner(2, 5, 0b0111));
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(n->version, 3);
  EXPECT_EQ(n->features, 0b0110u);
  const auto m = negotiate(banner(2, 5, 0b0111), banner(1, 3, 0b1110));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->version, 3);
  EXPECT_EQ(m->features, 0b0110u);
}

TEST(Banner, DisjointVersionsAreBadVersion) {
  expect_symmetric(banner(1, 1), banner(2, 3), WireErrc::bad_version);
  expect_symmetric(banner(3, 2), banner(1, 5), WireErrc::bad_banner);
}

TEST(Banner, RequiredFeatureThePeerLacksIsMissingFeatures) {
  const auto a = banner(1, 1, 0b11, 0b10);
  const auto b = banner(1, 1, 0b01, 0);
  expect_symmetric(a, b, WireErrc::missing_features);
  EXPECT_EQ(missing_features(a, b), 0b10u);
  EXPECT_EQ(missing_features(b, a), 0b10u);
  EXPECT_TRUE(negotiate(a, banner(1, 1, 0b10, 0)));
}

TEST(BannerDecoder, AcceptsBannerThenFramesOneByteAtATime) {
  auto wire = std::vector<std::byte>();
  append(wire, encode_banner(banner(1, 2, 0xF0, 0x10)));
  const auto payload = bytes_of("hello");
  const Segment seg{payload};
  append(wire, wire_test::frame_bytes(FrameType::hello, {&seg, 1}));
  WireDecoder dec(wire_test::with_local(banner(1, 1, 0x30, 0)));
  const auto d = decode_all(dec, wire, 1);
  ASSERT_FALSE(d.error) << d.error.message();
  EXPECT_EQ(d.banners, 1u);
  ASSERT_EQ(d.frames.size(), 1u);
  EXPECT_EQ(dec.negotiated().version, 1);
  EXPECT_EQ(dec.negotiated().features, 0x30u & 0xF0u);
  EXPECT_EQ(dec.peer_banner().required, 0x10u);
  EXPECT_EQ(dec.stats().banners, 1u);
}

TEST(BannerDecoder, WrongMagicFailsAfterEightBytes) {
  WireDecoder dec;
  auto wire = bytes_of("GET / HTTP/1.1\r\n");
  std::span<const std::byte> in = wire;
  EXPECT_EQ(dec.feed(in), DecodeEvent::error);
  EXPECT_EQ(in.size(), wire.size() - 8);  // nothing read past the magic
  EXPECT_EQ(dec.error(), make_error_code(WireErrc::bad_magic));
  EXPECT_EQ(dec.stats().errors_of(WireErrc::bad_magic), 1u);
  EXPECT_EQ(dec.feed(in), DecodeEvent::error);  // sticky, consumes nothing
  EXPECT_EQ(in.size(), wire.size() - 8);
  EXPECT_EQ(dec.stats().total_errors(), 1u);
}

TEST(BannerDecoder, CorruptBannerFailsItsCrc) {
  auto b = encode_banner(Banner{});
  b[17] ^= std::byte{0x40};
  WireDecoder dec;
  EXPECT_EQ(decode_all(dec, b, 5).error, make_error_code(WireErrc::bad_banner));
}

TEST(BannerDecoder, ExtensionIsSkippedAndBounded) {
  for (const std::size_t ext :
       {std::size_t{0}, std::size_t{7}, kMaxBannerExtension, kMaxBannerExtension + 1}) {
    auto b = encode_banner(Banner{});
    std::vector<std::byte> wire(b.begin(), b.begin() + kBannerFixedSize);
    wire::store_le<std::uint16_t>(wire.data() + 12, static_cast<std::uint16_t>(ext));
    // Fields of an unknown type (0x5A) fill the extension: skipped.
    for (std::size_t rem = ext; rem > 0;) {
      std::size_t len = std::min<std::size_t>(255, rem - 2);
      if (rem - 2 - len == 1) --len;
      wire.push_back(std::byte{0x5A});
      wire.push_back(static_cast<std::byte>(len));
      wire.resize(wire.size() + len, std::byte{0x5A});
      rem -= 2 + len;
    }
    wire.resize(wire.size() + 4);
    wire::store_le<std::uint32_t>(wire.data() + kBannerFixedSize + ext,
                                  crc32c(std::span<const std::byte>(wire.data(), wire.size() - 4)));
    WireDecoder dec;
    const auto d = decode_all(dec, wire, 3);
    if (ext <= kMaxBannerExtension) {
      EXPECT_FALSE(d.error) << ext << ": " << d.error.message();
      EXPECT_EQ(d.banners, 1u) << ext;
    } else {
      EXPECT_EQ(d.error, make_error_code(WireErrc::bad_banner)) << ext;
    }
  }
}

TEST(BannerDecoder, AuthFieldRoundTripsWithTheRawBytes) {
  Banner b{.supported = kFeatureAuthenticated, .required = kFeatureAuthenticated};
  BannerAuth a;
  a.node = 0x1122334455667788;
  for (std::size_t i = 0; i < kBannerNonceSize; ++i) a.nonce[i] = static_cast<std::byte>(i);
  b.auth = a;
  const auto bytes = encode_banner_ext(b);
  ASSERT_EQ(bytes.size(), kBannerAuthSize);
  WireDecoder dec(wire_test::with_local(Banner{.supported = kFeatureAuthenticated}));
  std::span<const std::byte> in(bytes);
  ASSERT_EQ(dec.feed(in), DecodeEvent::banner);
  ASSERT_TRUE(dec.peer_banner().auth.has_value());
  EXPECT_EQ(dec.peer_banner().auth->node, 0x1122334455667788u);
  EXPECT_TRUE(dec.peer_banner().auth->nonce == a.nonce);
  EXPECT_EQ(dec.negotiated().features, kFeatureAuthenticated);
  const auto raw = dec.peer_banner_bytes();
  EXPECT_TRUE(std::equal(raw.begin(), raw.end(), bytes.begin(), bytes.end()));
  // Without the auth field: the plain 36 bytes.
  EXPECT_EQ(encode_banner_ext(Banner{}).size(), kBannerSize);
}

TEST(BannerDecoder, MalformedExtensionFieldsAreBadBanner) {
  auto with_ext = [](std::vector<std::byte> ext) {
    std::array<std::byte, kBannerFixedSize + kMaxBannerExtension + 4> buf{};
    const auto b = encode_banner(Banner{});
    std::memcpy(buf.data(), b.data(), kBannerFixedSize);
    wire::store_le<std::uint16_t>(buf.data() + 12, static_cast<std::uint16_t>(ext.size()));
    std::copy(ext.begin(), ext.end(), buf.begin() + kBannerFixedSize);
    const std::size_t crc_at = kBannerFixedSize + ext.size();
    wire::store_le<std::uint32_t>(buf.data() + crc_at,
                                  crc32c(std::span<const std::byte>(buf.data(), crc_at)));
    return std::vector<std::byte>(buf.begin(),
                                  buf.begin() + static_cast<std::ptrdiff_t>(crc_at + 4));
  };
  const std::vector<std::byte> field40(42, std::byte{0});
  std::vector<std::byte> auth = field40;
  auth[0] = std::byte{kBannerFieldAuth};
  auth[1] = std::byte{40};
  std::vector<std::byte> twice = auth;
  twice.insert(twice.end(), auth.begin(), auth.end());
  std::vector<std::byte> short_auth(41, std::byte{0});
  short_auth[0] = std::byte{kBannerFieldAuth};
  short_auth[1] = std::byte{39};
  for (const auto& ext : {std::vector<std::byte>{std::byte{7}},
                          std::vector<std::byte>{std::byte{7}, std::byte{3}}, twice, short_auth}) {
    WireDecoder dec;
    EXPECT_EQ(decode_all(dec, with_ext(ext), 5).error, make_error_code(WireErrc::bad_banner))
        << ext.size();
  }
  WireDecoder ok;
  EXPECT_FALSE(decode_all(ok, with_ext(auth), 5).error);
}

TEST(BannerDecoder, VersionAndFeatureFailuresAreCounted) {
  {
    WireDecoder dec(wire_test::with_local(banner(2, 2)));
    EXPECT_EQ(decode_all(dec, encode_banner(banner(1, 1)), 36).error,
              make_error_code(WireErrc::bad_version));
    EXPECT_EQ(dec.stats().errors_of(WireErrc::bad_version), 1u);
    EXPECT_FALSE(dec.banner_done());
  }
  {
    WireDecoder dec(wire_test::with_local(banner(1, 1, 0, 0)));
    EXPECT_EQ(decode_all(dec, encode_banner(banner(1, 1, 4, 4)), 36).error,
              make_error_code(WireErrc::missing_features));
    EXPECT_EQ(dec.stats().errors_of(WireErrc::missing_features), 1u);
  }
}

TEST(BannerDecoder, GarbageAfterBannerFailsThePreambleCrc) {
  auto wire = std::vector<std::byte>();
  append(wire, encode_banner(Banner{}));
  append(wire, bytes_of("this is not a frame preamble!!!!"));
  WireDecoder dec;
  const auto d = decode_all(dec, wire, 1);
  EXPECT_EQ(d.banners, 1u);
  EXPECT_EQ(d.error, make_error_code(WireErrc::preamble_crc));
}

TEST(BannerDecoder, EndOfStreamInsideTheBannerIsTruncated) {
  const auto b = encode_banner(Banner{});
  WireDecoder fresh;
  EXPECT_EQ(fresh.finish(), DecodeEvent::need_more);  // nothing sent: just closed
  WireDecoder dec;
  std::span<const std::byte> in(b.data(), 20);
  EXPECT_EQ(dec.feed(in), DecodeEvent::need_more);
  EXPECT_EQ(dec.finish(), DecodeEvent::error);
  EXPECT_EQ(dec.error(), make_error_code(WireErrc::truncated));
}

}  // namespace
}  // namespace rmsg::wire
