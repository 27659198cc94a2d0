// A socket handed to another loop in a posted task (a messenger's accepted socket on its
// way to the shard that owns the peer): when the loop is destroyed with the task unrun, the
// task's OwnedSocket closes it. Counted in /proc/self/fd.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "rmsg/event_loop.h"
#include "tcp/tcp_socket.h"

namespace rmsg {
namespace {

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(OwnedSocket, APostedHandOffDroppedWithItsLoopClosesTheSocket) {
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  std::unique_ptr<EventLoop> loop = std::move(l).value();
  const std::size_t before = open_fds();
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ::close(fds[1]);
  bool ran = false;
  auto socket = std::make_shared<tcp::OwnedSocket>(fds[0]);
  loop->post([socket, &ran] {
    ran = true;
    tcp::close_socket(socket->release(), false);
  });
  socket.reset();
  EXPECT_EQ(open_fds(), before + 1);
  loop.reset();  // drops the task unrun
  EXPECT_FALSE(ran);
  // The loop's own descriptors (epoll, eventfd, timerfd) went with it as well.
  EXPECT_EQ(open_fds(), before - 3);
}

TEST(OwnedSocket, ReleaseGivesTheSocketAway) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  const std::size_t before = open_fds();
  int fd;
  {
    tcp::OwnedSocket a(fds[0]);
    tcp::OwnedSocket b(std::move(a));
    fd = b.release();
  }
  EXPECT_EQ(open_fds(), before);
  EXPECT_EQ(fd, fds[0]);
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace rmsg
