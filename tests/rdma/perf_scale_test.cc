// The short run of rmsg-perf --test scale in the guest (the full one is
// bench/softroce_scale.sh): 100 RDMA connections on one loop thread, every byte checked,
// and what must hold exactly - no RNR, the pinned memory per end equal to the rings it
// registers (VmPin cross-check), one QP per end, the setup bound per iteration kept.
// Speed is reported by the tool, never asserted here.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "kit/rdma_fixture.h"

namespace rmsg::testing {
namespace {

// The number after "key": in a JSON line, or -1.
double field(const std::string& json, const std::string& key) {
  const auto p = json.find("\"" + key + "\":");
  if (p == std::string::npos) return -1;
  return std::strtod(json.c_str() + p + key.size() + 3, nullptr);
}

class PerfScale : public RdmaTest {};

TEST_F(PerfScale, AHundredConnectionsOnOneLoopCheckEveryByteWithoutRnr) {
  constexpr int kConnections = 100;
  const std::string cmd = std::string(RMSG_PERF_BIN) +
                          " --test scale --transport rdma --json --size 16M --connections " +
                          std::to_string(kConnections) + " --address " + address().host();
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  std::printf("%s", out.c_str());
  ASSERT_EQ(status, 0) << cmd;
  EXPECT_EQ(field(out, "connections"), kConnections);
  EXPECT_EQ(field(out, "rnr"), 0) << "rxe counted RNR NAKs";
  // Each phase splits 16 MiB evenly among its active connections (all, then 10).
  constexpr double kTotal = 16 * 1024 * 1024;
  EXPECT_EQ(field(out, "bytes_checked"),
            2 * kTotal - (16 * 1024 * 1024) % kConnections - (16 * 1024 * 1024) % 10);
  EXPECT_EQ(field(out, "pinned_bytes_per_conn"), field(out, "registered_bytes_per_conn"));
  EXPECT_EQ(field(out, "qps"), 2 * kConnections);
  EXPECT_LE(field(out, "setup_max_calls_per_iteration"),
            RdmaOptions{}.max_setup_calls_per_iteration);
}

}  // namespace
}  // namespace rmsg::testing
