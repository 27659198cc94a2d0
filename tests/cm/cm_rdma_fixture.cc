#include "cm_rdma_fixture.h"

#include "rmsg/log.h"

namespace rmsg::testing {

using namespace std::chrono_literals;

void CmRdmaTest::SetUp() {
  set_log_handler(log_to_stderr, LogLevel::warn);  // the manager says why it destroys things
  RdmaTest::SetUp();
  if (HasFatalFailure()) return;
  make_manager({});
}

void CmRdmaTest::TearDown() {
  accepted_q_.clear();
  managed_listener_.close();
  manager_.reset();
  set_log_handler({});
}

void CmRdmaTest::make_manager(const ConnectionManagerOptions& options) {
  manager_.reset();
  auto m = ConnectionManager::create(loop(), options);
  ASSERT_TRUE(m.ok()) << m.error().message();
  manager_ = std::move(m).value();
}

ConnectionParams CmRdmaTest::params() const {
  ConnectionParams p;
  p.transport = Transport::rdma;
  p.peer = peer_;
  p.rdma = test_options();
  return p;
}

void CmRdmaTest::listen_managed(const ConnectionParams& server) {
  auto l = manager_->listen(address(), server,
                            [this](Stream s) { accepted_q_.push_back(std::move(s)); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  managed_listener_ = std::move(l).value();
  peer_ = address();
  peer_.set_port(managed_listener_.port());
}

Result<Stream> CmRdmaTest::connect_one(const ConnectionParams& p, ConnectReport* report) {
  std::optional<Result<Stream>> r;
  manager_->connect(p, [&](Result<Stream> s, const ConnectReport& rep) {
    r.emplace(std::move(s));
    if (report) *report = rep;
  });
  EXPECT_FALSE(r.has_value()) << "the callback ran inside connect()";
  if (!loop().run_for([&] { return r.has_value(); }, 30s)) {
    ADD_FAILURE() << "connect did not complete";
    return Errc::timeout;
  }
  return std::move(*r);
}

void CmRdmaTest::connect_pair(const ConnectionParams& p, Stream& client, Stream& server,
                              ConnectReport* report) {
  const std::size_t before = accepted_q_.size();
  auto r = connect_one(p, report);
  ASSERT_TRUE(r.ok()) << r.error().message();
  client = std::move(r).value();
  ASSERT_TRUE(loop().run_for([&] { return accepted_q_.size() > before; }, 20s));
  server = std::move(accepted_q_.back());
  accepted_q_.pop_back();
}

bool CmRdmaTest::wait_idle(std::size_t n, Duration limit) {
  return loop().run_for([&] { return manager_->idle() >= n && manager_->recycling() == 0; }, limit);
}

void CmRdmaTest::exchange_exact(Stream& a, Stream& b, std::size_t bytes) {
  const auto seed = fresh_seed("exchange");
  const auto ab = random_bytes(bytes, seed);
  const auto ba = random_bytes(bytes / 2 + 1, seed + 1);
  Writer wa(a, ab, seed + 2, 70000, true);
  Writer wb(b, ba, seed + 3, 30000, true);
  Reader ra(a, seed + 4, 50000);
  Reader rb(b, seed + 5, 20000);
  ASSERT_TRUE(loop().run_for(
      [&] { return (ra.eof || ra.error) && (rb.eof || rb.error) && wa.done && wb.done; }, 60s))
      << "exchange stalled: a got " << ra.got.size() << ", b got " << rb.got.size();
  ASSERT_FALSE(ra.error || rb.error || wa.error || wb.error);
  EXPECT_TRUE(rb.got == ab) << "a->b not byte-exact (" << rb.got.size() << " of " << ab.size()
                            << ")";
  EXPECT_TRUE(ra.got == ba) << "b->a not byte-exact (" << ra.got.size() << " of " << ba.size()
                            << ")";
}

}  // namespace rmsg::testing
