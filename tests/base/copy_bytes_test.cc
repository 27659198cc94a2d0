#include "base/copy_bytes.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>

namespace rmsg {
namespace {

// Every length up to past the inline cases, at every alignment of source and destination
// within 16 bytes: exactly the bytes asked for are copied, none around them touched.
TEST(CopyBytes, CopiesExactlyTheRangeForEveryLengthAndAlignment) {
  constexpr std::size_t kMax = 100;
  std::array<std::byte, kMax + 64> src{};
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7 + 1);
  for (std::size_t n = 0; n <= kMax; ++n) {
    for (std::size_t s = 0; s < 16; ++s) {
      for (std::size_t d = 0; d < 16; ++d) {
        std::array<std::byte, kMax + 64> dst;
        dst.fill(std::byte{0xEE});
        copy_bytes(dst.data() + d, src.data() + s, n);
        for (std::size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= d && i < d + n;
          const std::byte want = inside ? src[s + i - d] : std::byte{0xEE};
          ASSERT_EQ(dst[i], want) << "n " << n << " src +" << s << " dst +" << d << " byte " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace rmsg
