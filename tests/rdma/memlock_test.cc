// Memory that cannot be pinned: a process without CAP_IPC_LOCK (dropped with setpriv, as
// root holds it) under a low RLIMIT_MEMLOCK gets an error that names the limit and the
// fix, and tears down cleanly (the helper exits on its own).
#include <gtest/gtest.h>

#include "kit/process_util.h"
#include "kit/rdma_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class RdmaMemlock : public RdmaTest {};

TEST_F(RdmaMemlock, LowLimitWithoutCapIpcLockIsAClearError) {
  auto l = rdma_listen(loop(), address(), test_options(), [](Stream) {});
  ASSERT_TRUE(l.ok()) << l.error().message();
  // 64 KiB cannot hold the default rings (1 MiB per stream).
  Child child({"/usr/bin/setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock",
               helper_path(), "memlock", address().host(), std::to_string(l->port()), "65536"});
  ASSERT_TRUE(child.started());
  // The helper fails while acquiring its resources, before it reaches this listener.
  const std::string line = child.read_line(60000);
  const int rc = child.wait(10000);
  std::printf("helper: %s (exit status %d)\n", line.c_str(), rc);
  EXPECT_EQ(rc, 0) << "0: memlock error; 3: another error; 4: connected; 127: no setpriv";
  EXPECT_NE(line.find("RLIMIT_MEMLOCK"), std::string::npos) << line;
  EXPECT_NE(line.find("CAP_IPC_LOCK"), std::string::npos) << line;
  EXPECT_NE(line.find("ulimit -l"), std::string::npos) << line;
}

TEST_F(RdmaMemlock, TheErrorIsNotRetryable) {
  EXPECT_FALSE(is_retryable(memlock_limit_error()));
  EXPECT_NE(memlock_limit_error().message().find("RLIMIT_MEMLOCK"), std::string::npos);
}

}  // namespace
}  // namespace rmsg::testing
