#include "rmsg/result.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace rmsg {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Errc::invalid_argument;
  return v;
}

Result<int> doubled(int v) {
  RMSG_TRY(parse_positive(v));
  return 2 * v;
}

TEST(Result, HoldsValueOrError) {
  auto ok = parse_positive(3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value(), 3);
  EXPECT_FALSE(ok.error());

  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.is(Errc::invalid_argument));
  EXPECT_EQ(bad.error().category().name(), std::string("rmsg"));
}

TEST(Result, TryPropagates) {
  EXPECT_EQ(doubled(4).value(), 8);
  EXPECT_TRUE(doubled(0).is(Errc::invalid_argument));
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  ASSERT_TRUE(r);
  auto p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(Result, VoidResult) {
  Result<void> ok;
  EXPECT_TRUE(ok.ok());
  Result<void> bad = errno_code(ECONNRESET);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), std::errc::connection_reset);
}

TEST(Errors, EveryCodeHasAMessage) {
  for (int i = 1; i <= static_cast<int>(Errc::shutdown); ++i) {
    const auto msg = make_error_code(static_cast<Errc>(i)).message();
    EXPECT_EQ(msg.find("unknown"), std::string::npos) << i;
  }
}

TEST(Errors, Retryability) {
  EXPECT_TRUE(is_retryable(Errc::would_block));
  EXPECT_TRUE(is_retryable(Errc::resource_exhausted));
  EXPECT_TRUE(is_retryable(Errc::connection_refused));
  EXPECT_FALSE(is_retryable(Errc::protocol_error));
  EXPECT_FALSE(is_retryable(Errc::connection_reset));
  EXPECT_FALSE(is_retryable(Errc::rejected));
  EXPECT_TRUE(is_retryable(errno_code(EAGAIN)));
  EXPECT_FALSE(is_retryable(errno_code(EINVAL)));
}

}  // namespace
}  // namespace rmsg
