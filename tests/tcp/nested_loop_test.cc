// A callback that runs the loop itself (the loop allows it; RPC handlers may): the stream's
// and the listener's dispatch must still learn that a callback destroyed their object after
// a nested dispatch of the same object came and went. ASan reports the use-after-free these
// guard against.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include "kit/tcp_fixture.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
using testing::TcpTest;

// A blocking client socket connected to 127.0.0.1:port (the kernel completes the handshake
// before anyone accepts).
int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const auto address = SocketAddress::from_host_port("127.0.0.1", port).value();
  if (fd < 0 || ::connect(fd, address.sockaddr_ptr(), address.length()) < 0) {
    ADD_FAILURE() << "connect: " << errno;
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

TEST_F(TcpTest, StreamDestroyedAfterNestedDispatchOfItself) {
  auto [client, server] = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  std::optional<Stream> held(std::move(server));
  int depth = 0;
  int calls = 0;
  held->on_readable([&] {
    ++calls;
    if (depth > 0) return;  // the nested call leaves the byte unread: still readable
    ++depth;
    // The same stream is dispatched again inside this iteration's callback.
    ASSERT_TRUE(loop().run_once(0ms).ok());
    --depth;
    held.reset();  // the outer dispatch must notice and touch nothing more
  });
  ASSERT_EQ(client.write("x", 1).value(), 1u);
  EXPECT_TRUE(loop().run_for([&] { return !held.has_value(); }, 10s));
  EXPECT_EQ(calls, 2) << "the nested iteration dispatched the stream once more";
}

TEST_F(TcpTest, ListenerDestroyedAfterNestedAcceptBatch) {
  std::optional<Listener> listener;
  int depth = 0;
  int accepted = 0;
  auto l = tcp_listen(loop(), loopback(), {}, [&](Stream) {
    ++accepted;
    if (depth > 0) return;
    ++depth;
    // The second pending connection is accepted by a nested batch of this listener.
    ASSERT_TRUE(loop().run_once(0ms).ok());
    --depth;
    listener.reset();
  });
  ASSERT_TRUE(l.ok()) << l.error().message();
  listener.emplace(std::move(l).value());
  const int a = raw_connect(listener->port());
  const int b = raw_connect(listener->port());
  EXPECT_TRUE(loop().run_for([&] { return !listener.has_value(); }, 10s));
  EXPECT_EQ(accepted, 2);
  ::close(a);
  ::close(b);
}

}  // namespace
}  // namespace rmsg
