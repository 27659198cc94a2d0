// RecvRing driven like the stream drives it: receives complete in random order of
// blocks with data or control messages, read() consumes in random chunk sizes, consumed
// blocks are re-posted. 5 blocks (not a power of two); the queue ring's index wraps
// thousands of times. The bytes read must be exactly the bytes received, in order.
#include "rdma/recv_ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kit/seed.h"
#include "rdma/resources.h"

namespace rmsg::rdma {
namespace {

TEST(RecvRing, ByteExactThroughManyWraps) {
  constexpr std::uint32_t kBlocks = 5;
  constexpr std::uint32_t kBlockSize = 7;
  RecvRing ring;
  ring.reset(kBlocks);
  std::vector<std::vector<std::uint8_t>> memory(kBlocks, std::vector<std::uint8_t>(kBlockSize));
  std::vector<std::uint32_t> posted;  // blocks the model HCA may fill, in posting order
  for (std::uint32_t b = 0; b < kBlocks; ++b) {
    ring.on_posted(b);
    posted.push_back(b);
  }
  auto rng = testing::test_rng("recv-ring");
  std::uint8_t next_in = 0;
  std::uint8_t next_out = 0;
  std::uint64_t bytes = 0;
  for (int step = 0; step < 50000; ++step) {
    if (!posted.empty() && rng() % 2 == 0) {  // a receive completes (RC: posting order)
      const std::uint32_t b = posted.front();
      posted.erase(posted.begin());
      if (rng() % 5 == 0) {
        ASSERT_TRUE(ring.on_control(b));
        ring.on_posted(b);  // control messages re-post at once
        posted.push_back(b);
      } else {
        const auto len = static_cast<std::uint32_t>(1 + rng() % kBlockSize);
        for (std::uint32_t i = 0; i < len; ++i) memory[b][i] = next_in++;
        ASSERT_TRUE(ring.on_data(b, len));
        ASSERT_FALSE(ring.on_data(b, len)) << "a queued block must not be queued twice";
      }
    } else if (!ring.empty()) {  // read() takes a chunk of the front
      const RecvRing::Front f = ring.front();
      const auto n = static_cast<std::uint32_t>(1 + rng() % (f.len - f.offset));
      for (std::uint32_t i = 0; i < n; ++i) ASSERT_EQ(memory[f.block][f.offset + i], next_out++);
      bytes += n;
      if (ring.consume(n)) {
        ring.on_posted(f.block);
        posted.push_back(f.block);
      }
    }
    ASSERT_LE(ring.queued(), kBlocks);
    ASSERT_EQ(ring.queued() + posted.size(), kBlocks) << "a block went missing";
  }
  EXPECT_GT(bytes, 20000u);
}

TEST(RecvRing, RefusesBlocksNotPosted) {
  RecvRing ring;
  ring.reset(3);
  EXPECT_FALSE(ring.on_data(0, 4));  // never posted
  ring.on_posted(0);
  EXPECT_FALSE(ring.on_data(3, 4));  // out of range
  EXPECT_FALSE(ring.on_control(7));
  EXPECT_TRUE(ring.on_data(0, 4));
  EXPECT_FALSE(ring.on_control(0));  // queued, not posted
  EXPECT_FALSE(ring.consume(3));
  EXPECT_EQ(ring.front().offset, 3u);
  EXPECT_TRUE(ring.consume(1));
  EXPECT_TRUE(ring.empty());
  ring.on_posted(0);
  EXPECT_TRUE(ring.on_data(0, 2));
  ring.clear();
  EXPECT_TRUE(ring.empty());
  EXPECT_FALSE(ring.on_data(0, 2)) << "cleared blocks are not posted";
}

// The 16-bit generation and serial wrap past 0 (0: never used), and consecutive
// generations always differ, which is all that the wr_id check relies on (resources.h).
TEST(Generation, WrapsPastZero) {
  EXPECT_EQ(next_generation(0), 1);
  EXPECT_EQ(next_generation(0xFFFE), 0xFFFF);
  EXPECT_EQ(next_generation(0xFFFF), 1);
  EXPECT_EQ(next_serial(0xFFFF), 1);
  std::uint16_t g = 0xFFF0;
  for (int i = 0; i < 40; ++i) {
    const std::uint16_t n = next_generation(g);
    EXPECT_NE(n, g);
    EXPECT_NE(n, 0);
    g = n;
  }
}

}  // namespace
}  // namespace rmsg::rdma
