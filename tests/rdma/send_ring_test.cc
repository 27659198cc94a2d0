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
    // A signalled WR is in flight from its post until its completion is reaped: while
    // none is, the stream may leave its send CQ unpolled.
    const auto signalled_posted = std::count_if(m.queue_.begin(), m.queue_.end(),
                                                [](const Wr& w) { return w.post.signalled; });
    ASSERT_EQ(m.ring_.signalled_in_flight(), signalled_posted + m.cq_.size());
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
  EXPECT_EQ(m.ring_.signalled_in_flight(), 0u);
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

// Staging against a model: writes of random sizes go straight out when nothing is staged
// and space and a (random) credit allow, else join staged blocks; flushes post the staged
// blocks in order. Whatever way it went, the transmitted blocks carry exactly the
// written bytes in order, and no block is reused while staged or in flight.
class StagingModel {
 public:
  static constexpr std::uint32_t kCapacity = 100;
  struct Chunk {
    std::uint64_t id;
    std::uint32_t len;
  };
  StagingModel(std::uint32_t blocks, std::uint32_t first_block, std::uint32_t first_slot)
      : content_(blocks) {
    ring_.reset(blocks, blocks + 2, first_block, first_slot);
  }

  // One write of `len` bytes: returns the bytes taken.
  std::uint32_t write(std::uint32_t len, bool credit) {
    const std::uint64_t id = ++ids_;
    std::uint32_t done = 0;
    if (ring_.staged_blocks() == 0 && credit && ring_.free_blocks() > 0 &&
        ring_.free_slots() >= 2) {
      const std::uint32_t n = std::min(len, kCapacity);
      const SendRing::Post p = ring_.post(true);
      content_[p.block] = {{id, n}};
      queue_.push_back({p, content_[p.block]});
      done = n;
      ++sends_;
    }
    while (done < len) {
      const SendRing::Stage st = ring_.stage(kCapacity, len - done);
      if (st.len == 0) break;
      if (st.offset == 0) content_[st.block].clear();
      EXPECT_EQ(fill(st.block), st.offset);
      content_[st.block].push_back({id, st.len});
      done += st.len;
    }
    if (done > 0) append(written_, {id, done});
    return done;
  }
  void flush(int credits) {
    for (; credits > 0 && ring_.staged_blocks() > 0 && ring_.free_slots() >= 2; --credits) {
      const SendRing::Post p = ring_.post_staged();
      ASSERT_EQ(p.len, fill(p.block));
      queue_.push_back({p, content_[p.block]});
      ++sends_;
    }
  }
  void transmit(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> n(0, 4);
    for (int i = n(rng); i > 0 && !queue_.empty(); --i) {
      const Sent w = queue_.front();
      queue_.pop_front();
      ASSERT_EQ(content_[w.post.block].size(), w.content.size()) << "block reused in flight";
      for (const Chunk& c : w.content) append(received_, c);
      if (w.post.signalled) cq_.push_back(w.post.slot);
    }
  }
  void reap(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> n(0, 3);
    for (int i = n(rng); i > 0 && !cq_.empty(); --i) {
      const std::uint32_t slot = cq_.front();
      cq_.pop_front();
      ASSERT_GT(ring_.complete(slot), 0u);
    }
  }
  std::uint32_t fill(std::uint32_t block) const {
    std::uint32_t n = 0;
    for (const Chunk& c : content_[block]) n += c.len;
    return n;
  }
  static void append(std::vector<Chunk>& v, Chunk c) {
    if (!v.empty() && v.back().id == c.id) {
      v.back().len += c.len;
    } else {
      v.push_back(c);
    }
  }

  struct Sent {
    SendRing::Post post;
    std::vector<Chunk> content;
  };
  SendRing ring_;
  std::vector<std::vector<Chunk>> content_;  // per block: the writes in it
  std::deque<Sent> queue_;
  std::deque<std::uint32_t> cq_;
  std::vector<Chunk> written_, received_;
  std::uint64_t ids_ = 0;
  std::uint64_t sends_ = 0;
};

bool same(const std::vector<StagingModel::Chunk>& a, const std::vector<StagingModel::Chunk>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].len != b[i].len) return false;
  }
  return true;
}

TEST_P(SendRingModel, StagedWritesGoOutByteExactAndInOrder) {
  const Geo g = GetParam();
  StagingModel m(g.blocks, g.first_block, g.first_slot);
  auto rng = testing::test_rng("send-ring-staging");
  std::uniform_int_distribution<std::uint32_t> len(1, 250);
  std::bernoulli_distribution credit(0.3);
  std::uniform_int_distribution<int> credits(0, 3);
  std::uint64_t bytes = 0;
  std::uint64_t unshared = 0;  // SENDs if every write took blocks of its own
  for (int step = 0; step < 20000; ++step) {
    const std::uint32_t took = m.write(len(rng), credit(rng));
    bytes += took;
    unshared += (took + StagingModel::kCapacity - 1) / StagingModel::kCapacity;
    ASSERT_NO_FATAL_FAILURE(m.flush(credits(rng)));
    ASSERT_NO_FATAL_FAILURE(m.transmit(rng));
    ASSERT_NO_FATAL_FAILURE(m.reap(rng));
    ASSERT_LE(m.ring_.free_blocks() + m.ring_.staged_blocks(), g.blocks);
    const bool stuck =
        (m.ring_.free_blocks() == 0 && m.ring_.staged_blocks() == 0) || m.ring_.free_slots() < 2;
    if (stuck && m.ring_.in_flight() > 0) {
      const bool signalled_queued = std::any_of(m.queue_.begin(), m.queue_.end(),
                                                [](const auto& w) { return w.post.signalled; });
      ASSERT_TRUE(!m.cq_.empty() || signalled_queued) << "out of space, no completion coming";
    }
  }
  // Drain: flush everything staged, transmit and reap all.
  std::mt19937_64 rng2(2);
  for (int i = 0;
       i < 100000 && (m.ring_.staged_blocks() > 0 || !m.queue_.empty() || !m.cq_.empty()); ++i) {
    ASSERT_NO_FATAL_FAILURE(m.flush(3));
    ASSERT_NO_FATAL_FAILURE(m.transmit(rng2));
    ASSERT_NO_FATAL_FAILURE(m.reap(rng2));
  }
  ASSERT_EQ(m.ring_.staged_blocks(), 0u);
  EXPECT_TRUE(same(m.written_, m.received_)) << "bytes lost, duplicated or reordered";
  EXPECT_GT(bytes, 100000u);
  // Staged writes share blocks: fewer SENDs than blocks of their own would take.
  if (g.blocks > 1) {
    EXPECT_LT(m.sends_ * 10, unshared * 9);
  } else {
    EXPECT_LE(m.sends_, unshared);  // one block: nothing to share it with
  }
}

TEST(SendRing, StagedBytesAppendToTheLastBlockAndPostInOrder) {
  SendRing r;
  r.reset(4, 6, 3, 5);
  auto a = r.stage(100, 60);
  EXPECT_EQ(a.block, 3u);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.len, 60u);
  auto b = r.stage(100, 60);  // 40 fit into the same block
  EXPECT_EQ(b.block, 3u);
  EXPECT_EQ(b.offset, 60u);
  EXPECT_EQ(b.len, 40u);
  auto c = r.stage(100, 20);  // the rest: a new block, wrapped
  EXPECT_EQ(c.block, 0u);
  EXPECT_EQ(c.len, 20u);
  EXPECT_EQ(r.staged_blocks(), 2u);
  EXPECT_EQ(r.free_blocks(), 2u);
  EXPECT_TRUE(r.can_stage(100));
  const auto p1 = r.post_staged();
  EXPECT_EQ(p1.block, 3u);
  EXPECT_EQ(p1.len, 100u);
  EXPECT_EQ(p1.slot, 5u);
  const auto p2 = r.post_staged();
  EXPECT_EQ(p2.block, 0u);
  EXPECT_EQ(p2.len, 20u);
  EXPECT_EQ(r.staged_blocks(), 0u);
  EXPECT_EQ(r.complete(p2.slot), 2u);
  EXPECT_EQ(r.free_blocks(), 4u);
}

TEST(SendRing, NoRoomToStageWhenEveryBlockIsTaken) {
  SendRing r;
  r.reset(2, 4);
  r.post(true);
  EXPECT_EQ(r.stage(10, 10).len, 10u);
  EXPECT_FALSE(r.can_stage(10));
  EXPECT_EQ(r.stage(10, 5).len, 0u);
  const auto p = r.post_staged();
  EXPECT_TRUE(p.signalled) << "it took the last block: a completion must come";
}

}  // namespace
}  // namespace rmsg::rdma
