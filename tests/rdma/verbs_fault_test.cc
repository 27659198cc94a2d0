// Fault injection in verbs resource creation (verbs/seams.h): for every call of one kind
// that a whole connect makes (client first, then server, one process), the connect fails
// with a clear error, nothing is left behind (the kernel's census of our objects is back
// to its baseline), and the next connect without a fault succeeds. Plain rdma_listen /
// rdma_connect and the ConnectionManager (pooled structures, shared PD).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kit/rdma_fixture.h"
#include "kit/verbs_census.h"
#include "rmsg/connection_manager.h"
#include "rmsg/log.h"
#include "verbs/seams.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
using verbs::VerbsCall;

struct FaultCase {
  VerbsCall call;
  int err;
  bool managed;  // through a ConnectionManager on both sides
};
void PrintTo(const FaultCase& c, std::ostream* os);

const char* call_name(VerbsCall c) {
  switch (c) {
    case VerbsCall::alloc_pd:
      return "alloc_pd";
    case VerbsCall::create_comp_channel:
      return "create_comp_channel";
    case VerbsCall::create_cq:
      return "create_cq";
    case VerbsCall::create_qp:
      return "create_qp";
    case VerbsCall::reg_mr:
      return "reg_mr";
  }
  return "?";
}

void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << call_name(c.call) << " errno " << c.err << (c.managed ? " managed" : " plain");
}

std::string case_name(const ::testing::TestParamInfo<FaultCase>& info) {
  const auto& c = info.param;
  return std::string(call_name(c.call)) + "_" + (c.err == ENOMEM ? "ENOMEM" : "errno") +
         std::to_string(c.err) + (c.managed ? "_managed" : "_plain");
}

struct Objects {
  Census census;
  int pd = -1;
  friend bool operator==(const Objects&, const Objects&) = default;
  std::string to_string() const { return census.to_string() + ", pd " + std::to_string(pd); }
};

class RdmaVerbsFault : public RdmaTest, public ::testing::WithParamInterface<FaultCase> {
 protected:
  void SetUp() override {
    RdmaTest::SetUp();
    if (HasFatalFailure()) return;
    // A finite RLIMIT_MEMLOCK, so that ENOMEM from reg_mr is reported as the memlock
    // limit (root keeps CAP_IPC_LOCK: real registrations are not limited by it).
    ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &saved_limit_), 0);
    rlimit finite = saved_limit_;
    if (finite.rlim_cur == RLIM_INFINITY) finite.rlim_cur = rlim_t{1} << 40;
    if (finite.rlim_max != RLIM_INFINITY && finite.rlim_cur > finite.rlim_max) {
      finite.rlim_cur = finite.rlim_max;
    }
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &finite), 0) << std::strerror(errno);
    set_log_handler(
        [this](LogLevel, std::string_view m) {
          const std::lock_guard lock(log_mutex_);
          log_.emplace_back(m);
        },
        LogLevel::warn);
  }
  void TearDown() override {
    verbs::clear_verbs_faults();
    set_log_handler({});
    setrlimit(RLIMIT_MEMLOCK, &saved_limit_);
  }

  // Listener and (when managed) manager for the next connect.
  void start_server() {
    ConnectionParams params;
    params.rdma = test_options();
    Result<Listener> l = Errc::invalid_argument;
    if (GetParam().managed) {
      auto m = ConnectionManager::create(loop());
      ASSERT_TRUE(m.ok()) << m.error().message();
      manager_ = std::move(m).value();
      l = manager_->listen(address(), params, [this](Stream s) { server_ = std::move(s); });
    } else {
      l = rdma_listen(loop(), address(), params.rdma, [this](Stream s) { server_ = std::move(s); });
    }
    ASSERT_TRUE(l.ok()) << l.error().message();
    listener_ = std::move(l).value();
  }
  void stop_server() {
    client_.reset();
    server_.reset();
    listener_ = Listener();
    manager_.reset();  // idle and recycling structures go with it
  }

  // One connect to the listener; the client's result (and the accepted stream in server_).
  Result<Stream> connect_once() {
    ConnectionParams params;
    params.rdma = test_options();
    params.peer = address();
    params.peer.set_port(listener_.port());
    std::optional<Result<Stream>> result;
    auto done = [&](Result<Stream> r) { result.emplace(std::move(r)); };
    if (manager_) {
      manager_->connect(params, ConnectCallback(done));
    } else {
      rdma_connect(loop(), params.peer, params.rdma, done);
    }
    EXPECT_TRUE(loop().run_for([&] { return result.has_value(); }, 20s)) << "no connect result";
    if (!result) return Errc::timeout;
    return std::move(*result);
  }

  // A connect without faults that carries a byte each way.
  void connect_clean() {
    auto c = connect_once();
    ASSERT_TRUE(c.ok()) << c.error().message();
    client_ = std::move(c).value();
    ASSERT_TRUE(loop().run_for([&] { return server_.has_value(); }, 10s));
    ASSERT_TRUE(client_->write("c", 1).ok());
    ASSERT_TRUE(server_->write("s", 1).ok());
    char a = 0, b = 0;
    ASSERT_TRUE(loop().run_for(
        [&] {
          if (a == 0) (void)client_->read(&a, 1);
          if (b == 0) (void)server_->read(&b, 1);
          return a != 0 && b != 0;
        },
        10s));
    EXPECT_EQ(a, 's');
    EXPECT_EQ(b, 'c');
  }

  Objects objects() {
    std::string why;
    const auto c = verbs_objects_of({"qp", "cq", "mr", "pd"}, &why);  // one process
    Objects o{Census{c[0], c[1], c[2]}, c[3]};
    EXPECT_TRUE(o.census.ok() && o.pd >= 0) << why;
    return o;
  }
  // The census once it equals `want` (teardown may be deferred a loop turn or two).
  Objects settle(const Objects& want) {
    Objects now = objects();
    for (int i = 0; i < 10 && !(now == want); ++i) {
      loop().run_for([] { return false; }, 100ms);
      now = objects();
    }
    return now;
  }

  bool logged(const std::string& text) {
    const std::lock_guard lock(log_mutex_);
    for (const auto& line : log_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }

  std::unique_ptr<ConnectionManager> manager_;
  std::optional<Stream> client_;
  std::optional<Stream> server_;
  rlimit saved_limit_{};
  std::mutex log_mutex_;
  std::vector<std::string> log_;
};

TEST_P(RdmaVerbsFault, EveryCallOfAConnectFailsItCleanly) {
  const FaultCase fc = GetParam();
  const std::error_code expected =
      fc.call == VerbsCall::reg_mr && fc.err == ENOMEM ? memlock_limit_error() : errno_code(fc.err);
  // A clean connect first: librdmacm's per-device state exists from then on, and the
  // count of calls of this kind is known (client's first, then the server's).
  ASSERT_NO_FATAL_FAILURE(start_server());
  verbs::clear_verbs_faults();
  ASSERT_NO_FATAL_FAILURE(connect_clean());
  const unsigned calls = verbs::verbs_calls(fc.call);
  stop_server();
  ASSERT_GE(calls, 1u);
  // The baseline has a listener up: its bound rdma_cm id holds librdmacm's PD.
  ASSERT_NO_FATAL_FAILURE(start_server());
  const Objects baseline = objects();
  std::printf("%s: %u calls per connect; baseline %s\n", call_name(fc.call), calls,
              baseline.to_string().c_str());

  int active = 0, passive = 0;
  for (unsigned n = 1; n <= calls; ++n) {
    SCOPED_TRACE("call " + std::to_string(n) + " of " + std::to_string(calls));
    {
      const std::lock_guard lock(log_mutex_);
      log_.clear();
    }
    verbs::inject_verbs_fault(fc.call, n, fc.err);
    auto r = connect_once();
    const bool hit = verbs::verbs_calls(fc.call) >= n;
    verbs::clear_verbs_faults();
    ASSERT_TRUE(hit) << "the connect made fewer calls than the clean one";
    ASSERT_FALSE(r.ok()) << "connected despite the fault";
    const std::string accept_log = "rdma accept failed: " + expected.message();
    if (logged(accept_log)) {
      // The server failed to build its side: it rejects, the client hears a reject.
      ++passive;
      EXPECT_TRUE(r.is(Errc::rejected)) << r.error().message();
    } else {
      ++active;
      EXPECT_EQ(r.error(), expected) << r.error().message();
    }
    EXPECT_FALSE(server_.has_value()) << "a stream was accepted";
    const Objects after = settle(baseline);
    EXPECT_EQ(after, baseline) << "left behind: " << after.to_string() << " vs "
                               << baseline.to_string();
    // The next connect, without a fault, works; then a fresh server (and manager: none
    // of its structures is reused by the next round).
    ASSERT_NO_FATAL_FAILURE(connect_clean());
    stop_server();
    ASSERT_NO_FATAL_FAILURE(start_server());
  }
  // The client builds its side before the server hears of it: the first half fails the
  // client's setup, the second the server's. Both ends share the loop's one completion
  // channel for the device: the client's structure makes it, the server's finds it.
  EXPECT_EQ(active + passive, static_cast<int>(calls));
  EXPECT_GE(active, 1);
  if (fc.call == VerbsCall::create_comp_channel) {
    EXPECT_EQ(calls, 1u) << "a completion channel per stream, not per loop and device";
  } else {
    EXPECT_GE(passive, 1);
  }
  const Objects end = settle(baseline);
  EXPECT_EQ(end, baseline) << end.to_string();
  std::printf("%s (%s): %u fault cases, %d on the client, %d on the server\n", call_name(fc.call),
              expected.message().c_str(), calls, active, passive);
}

INSTANTIATE_TEST_SUITE_P(Plain, RdmaVerbsFault,
                         ::testing::Values(FaultCase{VerbsCall::alloc_pd, EACCES, false},
                                           FaultCase{VerbsCall::create_comp_channel, EMFILE, false},
                                           FaultCase{VerbsCall::create_cq, ENOSPC, false},
                                           FaultCase{VerbsCall::create_qp, EBUSY, false},
                                           FaultCase{VerbsCall::reg_mr, EFAULT, false},
                                           FaultCase{VerbsCall::reg_mr, ENOMEM, false}),
                         case_name);

// Under a manager the PD is shared and a failed alloc_pd is retried once by the structure
// itself, so the PD is left out there.
INSTANTIATE_TEST_SUITE_P(Managed, RdmaVerbsFault,
                         ::testing::Values(FaultCase{VerbsCall::create_comp_channel, EMFILE, true},
                                           FaultCase{VerbsCall::create_cq, ENOSPC, true},
                                           FaultCase{VerbsCall::create_qp, EBUSY, true},
                                           FaultCase{VerbsCall::reg_mr, ENOMEM, true}),
                         case_name);

}  // namespace
}  // namespace rmsg::testing
