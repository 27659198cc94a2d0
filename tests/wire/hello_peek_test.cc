// The routing peek at an inbound hello (src/wire/hello_peek.h): a banner and the first
// frame's preamble and node field, as a connector writes them with its connect.
#include "wire/hello_peek.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "wire/banner.h"
#include "wire/crc32c.h"
#include "wire/frame.h"
#include "wire/frame_types.h"
#include "wire/session_frames.h"

namespace rmsg::wire {
namespace {

// A valid banner with an `ext`-byte extension (the router checks it whole), then a hello
// preamble and payload (the router reads only the node field of those).
std::vector<std::byte> hello_bytes(NodeId node, std::size_t ext = 0) {
  const auto banner = encode_banner(Banner{});
  std::vector<std::byte> out(banner.begin(), banner.begin() + kBannerFixedSize);
  out[12] = static_cast<std::byte>(ext & 0xff);
  out[13] = static_cast<std::byte>(ext >> 8);
  out.resize(kBannerFixedSize + ext);
  const std::uint32_t crc = crc32c(out);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(crc >> (8 * i)));
  Hello h;
  h.node = node;
  h.client_cookie = 5;
  const auto payload = encode(h);
  std::vector<std::byte> frame(kPreambleSize);
  frame[0] = static_cast<std::byte>(FrameType::client_ident);
  frame[2] = std::byte{1};
  frame[4] = static_cast<std::byte>(payload.size());
  out.insert(out.end(), frame.begin(), frame.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

TEST(HelloPeek, FindsTheNodeAndAsksForWhatIsMissing) {
  using V = HelloPeek::Verdict;
  const auto b = hello_bytes(0x1234, 10);
  for (std::size_t n = 0; n < kBannerSize + 10 + kPreambleSize + 8; ++n) {
    const auto p = peek_hello(std::span(b).first(n));
    ASSERT_EQ(p.verdict, V::need_more) << n;
    EXPECT_GT(p.need, n);
    EXPECT_LE(p.need, peek_hello_cap());
  }
  const auto p = peek_hello(b);
  ASSERT_EQ(p.verdict, V::node);
  EXPECT_EQ(p.node, 0x1234u);
}

TEST(HelloPeek, RejectsWhatIsNoMessengerHello) {
  using V = HelloPeek::Verdict;
  const std::string http = "GET / HTTP/1.1\r\n";
  EXPECT_EQ(peek_hello({reinterpret_cast<const std::byte*>(http.data()), http.size()}).verdict,
            V::malformed);
  auto wrong_type = hello_bytes(7);  // fresh, not a copy (GCC -O3 warns on the copy)
  wrong_type[kBannerSize] = static_cast<std::byte>(FrameType::message);
  EXPECT_EQ(peek_hello(wrong_type).verdict, V::malformed);
  auto long_ext = hello_bytes(7);
  long_ext[13] = std::byte{0x10};  // 4096 > 256
  EXPECT_EQ(peek_hello(long_ext).verdict, V::malformed);
  EXPECT_EQ(peek_hello(hello_bytes(0)).verdict, V::malformed);
  // A banner the shard would refuse is refused as soon as it is complete, not at the
  // handshake timeout: a bad CRC, and a version this build does not speak.
  auto bad_crc = hello_bytes(7);
  bad_crc[kBannerFixedSize] ^= std::byte{1};
  EXPECT_EQ(peek_hello(std::span(bad_crc).first(kBannerSize)).verdict, V::malformed);
  const auto v9 = encode_banner(Banner{.version_min = 9, .version_max = 9});
  EXPECT_EQ(peek_hello(v9).verdict, V::malformed);
}

TEST(HelloPeek, AuthBannerNamesItsSenderWithoutAHello) {
  Banner b{.supported = kFeatureAuthenticated, .required = kFeatureAuthenticated};
  b.auth = BannerAuth{.node = 0x77, .nonce = {}};
  const auto bytes = encode_banner_ext(b);
  const HelloPeek p = peek_hello(bytes);
  EXPECT_EQ(p.verdict, HelloPeek::Verdict::node);
  EXPECT_EQ(p.node, 0x77u);
}

}  // namespace
}  // namespace rmsg::wire
