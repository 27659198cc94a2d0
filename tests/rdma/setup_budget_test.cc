// RdmaOptions::max_setup_calls_per_iteration on a real device: a burst of connect requests
// is accepted with never more setup calls in one loop iteration than the bound, and every
// connection is still made. (Whether requests arrive in one dispatch depends on the
// device's timing; the deferral itself is counted by the SetupBudget unit tests and by
// rmsg-perf --test scale, docs/perf.md.)
#include <gtest/gtest.h>

#include "kit/rdma_fixture.h"
#include "rdma/setup_budget.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class RdmaSetupBudget : public RdmaTest {};

TEST_F(RdmaSetupBudget, ABurstOfConnectsIsAcceptedWithinTheBoundPerIteration) {
  constexpr int kConnects = 8;
  RdmaOptions server = test_options();
  server.max_setup_calls_per_iteration = rdma::kAcceptSetupCalls;  // one accept per iteration
  std::vector<Stream> accepted;
  auto l =
      rdma_listen(loop(), address(), server, [&](Stream s) { accepted.push_back(std::move(s)); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  SocketAddress peer = address();
  peer.set_port(l->port());
  std::vector<Stream> clients;
  int failed = 0;
  std::error_code error;
  for (int i = 0; i < kConnects; ++i) {
    rdma_connect(loop(), peer, test_options(), [&](Result<Stream> r) {
      if (r) {
        clients.push_back(std::move(r).value());
      } else {
        ++failed;
        error = r.error();
      }
    });
  }
  ASSERT_TRUE(loop().run_for(
      [&] { return failed > 0 || (clients.size() == kConnects && accepted.size() == kConnects); },
      60s))
      << clients.size() << " connected, " << accepted.size() << " accepted";
  ASSERT_EQ(failed, 0) << error.message();
  const auto& c = rdma::SetupBudget::of(loop())->counters();
  EXPECT_EQ(c.value("setup.calls"), std::uint64_t{kConnects} * rdma::kAcceptSetupCalls);
  EXPECT_EQ(c.value("setup.max_calls_per_iteration"), rdma::kAcceptSetupCalls);
  std::printf("setup.deferred %llu\n", static_cast<unsigned long long>(c.value("setup.deferred")));
}

}  // namespace
}  // namespace rmsg::testing
