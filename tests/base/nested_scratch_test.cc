// NestedScratch: each nesting depth of a thread gets its own buffer, reused at that depth.
#include "base/nested_scratch.h"

#include <gtest/gtest.h>

namespace rmsg {
namespace {

TEST(NestedScratch, EachDepthHasItsOwnBufferReusedAtThatDepth) {
  std::byte* outer_first = nullptr;
  {
    const NestedScratch<64> outer;
    outer_first = outer.span().data();
    EXPECT_EQ(outer.span().size(), 64u);
    const NestedScratch<64> inner;
    EXPECT_NE(inner.span().data(), outer.span().data());
  }
  const NestedScratch<64> again;
  EXPECT_EQ(again.span().data(), outer_first);
}

}  // namespace
}  // namespace rmsg
