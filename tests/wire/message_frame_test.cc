// The one-pass message frame (msg/message_frame.h) against the general encoder: the same
// bytes for every payload size and header value, and the same oversize bound.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kit/seed.h"
#include "wire/frame_encoder.h"
#include "wire/message_frame.h"

namespace rmsg::wire {
namespace {

std::vector<std::byte> general(const MessageHeader& h, std::span<const std::byte> payload) {
  const auto header = encode(h);
  const Segment segs[] = {{header, 0}, {payload, 0}};
  std::vector<std::byte> out(encoded_frame_size(segs));
  EXPECT_TRUE(encode_frame_to(out, FrameType::message, segs, {}));
  return out;
}

TEST(MessageFrame, SameBytesAsTheGeneralEncoder) {
  auto rng = rmsg::testing::test_rng("message_frame");
  for (std::size_t n : {0, 1, 2, 3, 7, 8, 9, 63, 64, 88, 255, 256, 1000, 4096, 70000}) {
    std::vector<std::byte> payload(n);
    for (auto& b : payload) b = static_cast<std::byte>(rng());
    const MessageHeader h{rng(), rng(), static_cast<std::uint32_t>(rng()),
                          static_cast<std::uint16_t>(rng())};
    const auto want = general(h, payload);
    // Poisoned, so that a byte the one-pass encoder leaves out shows.
    std::vector<std::byte> got(kMessageFrameOverhead + n, std::byte{0xa5});
    ASSERT_EQ(got.size(), want.size());
    encode_message_frame(got.data(), h, payload);
    EXPECT_EQ(got, want) << "payload " << n;
  }
}

TEST(MessageFrame, FitsAsTheGeneralEncoderChecks) {
  const FrameLimits limits{.max_frame_size = 100};
  EXPECT_TRUE(message_frame_fits(100 - MessageHeader::kSize, limits));
  EXPECT_FALSE(message_frame_fits(101 - MessageHeader::kSize, limits));
  const auto header = encode(MessageHeader{});
  std::vector<std::byte> payload(101 - MessageHeader::kSize);
  const Segment segs[] = {{header, 0}, {payload, 0}};
  std::vector<std::byte> out(encoded_frame_size(segs));
  EXPECT_FALSE(encode_frame_to(out, FrameType::message, segs, limits));
  EXPECT_FALSE(message_frame_fits(SIZE_MAX / 2, {.max_frame_size = UINT32_MAX}));
}

}  // namespace
}  // namespace rmsg::wire
