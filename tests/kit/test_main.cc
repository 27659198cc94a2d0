// main() of every rmsg test binary (instead of gtest_main): prints the test seed first and,
// for each failed test, how to rerun it with that seed.
#include <gtest/gtest.h>

#include <cstdio>

#include "kit/seed.h"

namespace {

class RerunHint : public ::testing::EmptyTestEventListener {
 public:
  explicit RerunHint(const char* argv0) : argv0_(argv0) {}
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::printf("[ rerun    ] RMSG_TEST_SEED=%llu %s --gtest_filter='%s.%s'\n",
                static_cast<unsigned long long>(rmsg::testing::test_seed()), argv0_,
                info.test_suite_name(), info.name());
    std::fflush(stdout);
  }

 private:
  const char* argv0_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Not while listing: CTest and the RDMA tier parse that output.
  if (!GTEST_FLAG_GET(list_tests)) rmsg::testing::print_test_seed();
  ::testing::UnitTest::GetInstance()->listeners().Append(new RerunHint(argv[0]));
  return RUN_ALL_TESTS();
}
