// SendRing driven like the stream drives it, against a model send queue: WRs go out in
// order, a signalled one completes everything before it, completions are reaped late and
// in random batches. Non-power-of-two geometries, starting just before the indices wrap.
// Each data block carries a pattern; when the model transmits a WR its block must still
// hold that WR's bytes, so a block handed out twice (or freed early) fails byte-exactness.
#include "rdma/send_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "kit/seed.h"

namespace rmsg::rdma {
namespace {

struct Wr {
  SendRing::Post post;
  bool data;
  std::uint64_t pattern;
};

class ModelSq {
 public:
  ModelSq(std::uint32_t blocks, std::uint32_t slots, std::uint32_t first_block,
          std::uint32_t first_slot)
      : block_bytes_(blocks, 0) {
    ring_.reset(blocks, slots, first_block, first_slot);
  }

  // Posts as the stream does: data needs a free block, every WR a slot, one slot stays
  // for control when posting data.
  bool post_data() {
    if (ring_.free_blocks() == 0 || ring_.free_slots() < 2) return false;
    const SendRing::Post p = ring_.post(true);
    block_bytes_[p.block] = ++pattern_;  // the copy into the block
    queue_.push_back({p, true, pattern_});
    ++posted_data_;
    return true;
  }
  bool post_control() {
    if (ring_.free_slots() < 1) return false;
    queue_.push_back({ring_.post(false), false, 0});
    return true;
  }
  // The HCA sends the oldest WR: its block still holds its bytes; a signalled one makes
  // a completion.
  void transmit(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> n(0, 4);
    for (int i = n(rng); i > 0 && !queue_.empty(); --i) {
      const Wr w = queue_.front();
      queue_.pop_front();
      if (w.data) {
        ASSERT_EQ(block_bytes_[w.post.block], w.pattern) << "block reused while in flight";
        ++sent_data_;
      }
      if (w.post.signalled) cq_.push_back(w.post.slot);
    }
  }
  void reap(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> n(0, 3);
    for (int i = n(rng); i > 0 && !cq_.empty(); --i) {
      const std::uint32_t slot = cq_.front();
      cq_.pop_front();
      ASSERT_GT(ring_.complete(slot), 0u);
      ASSERT_EQ(ring_.complete(slot), 0u) << "a repeated completion must be refused";
    }
  }
  // Every WR transmitted and reaped: the ring is empty again.
  void drain() {
    std::mt19937_64 rng(1);
    while (!queue_.empty() || !cq_.empty()) {
      transmit(rng);
      reap(rng);
    }
    // Unsignalled WRs after the last signalled one complete with the next signalled one.
    if (ring_.in_flight() == 0) return;
    ASSERT_GE(ring_.free_slots(), 1u);
    queue_.push_back({ring_.post(false, /*force_signal=*/true), false, 0});
    while (!queue_.empty() || !cq_.empty()) {
      transmit(rng);
      reap(rng);
    }
  }

  SendRing ring_;
  std::vector<std::uint64_t> block_bytes_;
  std::deque<Wr> queue_;
  std::deque<std::uint32_t> cq_;
  std::uint64_t pattern_ = 0;
  std::uint64_t posted_data_ = 0;
  std::uint64_t sent_data_ = 0;
};

struct Geo {
  std::uint32_t blocks;
  std::uint32_t first_block;
  std::uint32_t first_slot;
};

class SendRingModel : public ::testing::TestWithParam<Geo> {};

TEST_P(SendRingModel, ByteExactAcrossTheIndexWrap) {
  const Geo g = GetParam();
  ModelSq m(g.blocks, g.blocks + 2, g.first_block, g.first_slot);
  auto rng = testing::test_rng("send-ring");
  std::bernoulli_distribution control(0.1);
  for (int step = 0; step < 20000; ++step) {
    if (control(rng)) {
      m.post_control();
    } else {
      m.post_data();
    }
    ASSERT_NO_FATAL_FAILURE(m.transmit(rng));
    ASSERT_NO_FATAL_FAILURE(m.reap(rng));
    ASSERT_LE(m.ring_.free_blocks(), g.blocks);
    ASSERT_LE(m.ring_.in_flight(), g.blocks + 2);
    // Never stuck: when no space is left, a signalled WR is still coming.
    if (m.ring_.free_blocks() == 0 || m.ring_.free_slots() < 2) {
      const bool signalled_queued = std::any_of(m.queue_.begin(), m.queue_.end(),
                                                [](const Wr& w) { return w.post.signalled; });
      ASSERT_TRUE(!m.cq_.empty() || signalled_queued) << "out of space, no completion coming";
    }
  }
  ASSERT_NO_FATAL_FAILURE(m.drain());
  EXPECT_EQ(m.ring_.free_blocks(), g.blocks);
  EXPECT_EQ(m.ring_.free_slots(), g.blocks + 2);
  EXPECT_EQ(m.sent_data_, m.posted_data_);
  EXPECT_GT(m.posted_data_, 10000u);  // the indices went round many times
}

INSTANTIATE_TEST_SUITE_P(Geometries, SendRingModel,
                         ::testing::Values(Geo{7, 5, 7}, Geo{5, 4, 6}, Geo{1, 0, 2},
                                           Geo{13, 12, 14}, Geo{16, 15, 17}));

// The last WR before space runs out is signalled, so the writer that stops there always
// gets a completion that frees space.
TEST(SendRing, SignalsWhenTheLastBlockIsTaken) {
  SendRing r;
  r.reset(7, 9, 6, 8);
  std::vector<SendRing::Post> posts;
  while (r.free_blocks() > 0 && r.free_slots() >= 2) posts.push_back(r.post(true));
  ASSERT_EQ(posts.size(), 7u);
  EXPECT_TRUE(posts.back().signalled);
  EXPECT_EQ(posts.front().block, 6u);  // started at the last index...
  EXPECT_EQ(posts[1].block, 0u);       // ...and wrapped
  EXPECT_EQ(posts.front().slot, 8u);
  EXPECT_EQ(posts[1].slot, 0u);
  // One completion of the last WR frees every block.
  EXPECT_EQ(r.complete(posts.back().slot), 7u);
  EXPECT_EQ(r.free_blocks(), 7u);
  EXPECT_EQ(r.free_slots(), 9u);
}

TEST(SendRing, RefusesSlotsNotInFlight) {
  SendRing r;
  r.reset(5, 7, 3, 5);
  const auto a = r.post(true);
  const auto b = r.post(false);
  EXPECT_EQ(r.complete(static_cast<std::uint32_t>((b.slot + 1) % 7)), 0u);  // never posted
  EXPECT_EQ(r.complete(99), 0u);                                            // out of range
  EXPECT_EQ(r.complete(a.slot), 1u);
  EXPECT_EQ(r.complete(a.slot), 0u);  // already complete
  EXPECT_EQ(r.free_blocks(), 5u);
  EXPECT_EQ(r.in_flight(), 1u);
  EXPECT_EQ(r.complete(b.slot), 1u);
  EXPECT_EQ(r.in_flight(), 0u);
}

TEST(SendRing, MarkIsDoneWhenItsWrsComplete) {
  SendRing r;
  r.reset(7, 9, 0, 7);
  EXPECT_TRUE(r.marked_done());
  r.post(true);
  const auto probe = r.post(false, /*force_signal=*/true);
  EXPECT_TRUE(probe.signalled);
  r.mark();
  const auto later = r.post(true);
  EXPECT_FALSE(r.marked_done());
  EXPECT_EQ(r.complete(probe.slot), 2u);
  EXPECT_TRUE(r.marked_done());
  EXPECT_EQ(r.complete(later.slot), 1u);
  EXPECT_TRUE(r.marked_done());
}

}  // namespace
}  // namespace rmsg::rdma
