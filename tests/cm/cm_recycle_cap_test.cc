// ConnectionManagerOptions::max_recycling: structures released beyond the bound are
// destroyed instead of recycled, and counted (structures.recycle_full).
#include <gtest/gtest.h>

#include "cm_rdma_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class CmRecycleCap : public CmRdmaTest {};

TEST_F(CmRecycleCap, ReleasesBeyondTheBoundAreDestroyedAndCounted) {
  ConnectionManagerOptions o;
  o.max_recycling = 2;
  ASSERT_NO_FATAL_FAILURE(make_manager(o));
  ASSERT_NO_FATAL_FAILURE(listen_managed(params()));
  constexpr int kPairs = 3;
  std::vector<Stream> ends;
  for (int i = 0; i < kPairs; ++i) {
    Stream c, s;
    ASSERT_NO_FATAL_FAILURE(connect_pair(params(), c, s));
    ends.push_back(std::move(c));
    ends.push_back(std::move(s));
  }
  // Six structures come back while the first two still wait for their timewait.
  for (auto& e : ends) e.close();
  ends.clear();
  ASSERT_TRUE(loop().run_for(
      [&] { return counter("structures.recycle_full") + cm().recycling() >= 2 * kPairs; }, 20s))
      << counter("structures.recycle_full") << " refused, " << cm().recycling() << " recycling";
  EXPECT_EQ(cm().recycling(), 2u);
  EXPECT_EQ(counter("structures.recycle_full"), static_cast<std::uint64_t>(2 * kPairs - 2));
  // The two recycled ones come back to the pool.
  EXPECT_TRUE(wait_idle(2));
  EXPECT_EQ(cm().recycling(), 0u);
}

}  // namespace
}  // namespace rmsg::testing
