#include "rmsg/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rmsg {
namespace {

TEST(Log, SilentByDefaultAndFiltersByLevel) {
  int evaluated = 0;
  auto arg = [&] { return ++evaluated; };
  RMSG_LOG(error, "nobody listens %d", arg());
  EXPECT_EQ(evaluated, 0) << "arguments must not be evaluated without a handler";

  std::vector<std::string> seen;
  set_log_handler([&](LogLevel, std::string_view m) { seen.emplace_back(m); }, LogLevel::warn);
  RMSG_LOG(info, "dropped %d", 1);
  RMSG_LOG(warn, "kept %d", 2);
  RMSG_LOG(error, "kept %s", "three");
  set_log_handler({});
  RMSG_LOG(error, "after reset");
  EXPECT_EQ(seen, (std::vector<std::string>{"kept 2", "kept three"}));
}

}  // namespace
}  // namespace rmsg
