// LiveStreams: a number finds its stream until it is removed, and never again after, even
// when its slot holds another stream by then.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "rdma/live_streams.h"

namespace rmsg::rdma {
namespace {

RdmaStream* fake(std::uintptr_t n) {
  return reinterpret_cast<RdmaStream*>(n * 16);  // never dereferenced
}

TEST(LiveStreams, ARemovedNumberIsNeverFoundAgainThoughItsSlotIsReused) {
  LiveStreams live;
  std::vector<std::uint64_t> gone;
  std::vector<std::uint64_t> ids;
  for (std::uintptr_t i = 1; i <= 4; ++i) ids.push_back(live.add(fake(i)));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_NE(ids[i], 0u);
    EXPECT_EQ(live.find(ids[i]), fake(i + 1));
  }
  for (int round = 0; round < 100; ++round) {
    const std::uint64_t old = ids[round % 4];
    live.remove(old);
    live.remove(old);  // twice: harmless
    gone.push_back(old);
    EXPECT_EQ(live.find(old), nullptr);
    const std::uint64_t fresh = live.add(fake(100 + round));
    ids[round % 4] = fresh;
    EXPECT_EQ(live.find(fresh), fake(100 + round));
    for (const auto g : gone) ASSERT_EQ(live.find(g), nullptr) << "a stale number found a stream";
  }
  EXPECT_EQ(live.find(0), nullptr);
  EXPECT_EQ(live.find(~std::uint64_t{0}), nullptr);
}

}  // namespace
}  // namespace rmsg::rdma
