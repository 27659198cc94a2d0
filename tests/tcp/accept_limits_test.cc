// A listener that runs out of descriptors pauses instead of spinning on the pending
// connection, and accepts it once descriptors are free again.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <vector>

#include "kit/tcp_fixture.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
using testing::TcpTest;

TEST_F(TcpTest, ListenerOutOfDescriptorsPausesThenAccepts) {
  // A first connection runs every code path once: UBSan's vptr check keeps a cache of
  // the types it has seen, and on a miss probes memory through a pipe(), which would fail
  // below and be reported as a bad object.
  auto [first_client, first_server] = connect_pair();
  ASSERT_TRUE(first_client.valid() && first_server.valid());
  std::optional<Result<Stream>> client;
  tcp_connect(loop(), loopback(listener_.port()), {},
              [&](Result<Stream> r) { client.emplace(std::move(r)); });

  // Use up every descriptor under a lowered soft limit (restored at the end).
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 128;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
  ASSERT_EQ(errno, EMFILE);

  // The handshake completes in the kernel; accept() fails with EMFILE. Count callbacks
  // for a while: a spinning listener would run one per iteration.
  int callbacks = 0;
  const auto until = Clock::now() + 50ms;
  while (Clock::now() < until) callbacks += loop().run_once(5ms).value();
  EXPECT_TRUE(accepted_.empty());
  EXPECT_LT(callbacks, 10) << "the listener spins on EMFILE";

  for (int fd : fillers) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(loop().run_for([&] { return !accepted_.empty() && client.has_value(); }, 5s));
  ASSERT_TRUE(client->ok()) << client->error().message();
  ASSERT_EQ((*client)->write("ok", 2).value(), 2u);
  char buf[2];
  ASSERT_TRUE(loop().run_for([&] { return accepted_.front().read(buf, 2).ok(); }, 5s));
}

}  // namespace
}  // namespace rmsg
