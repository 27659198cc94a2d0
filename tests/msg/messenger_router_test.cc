// The accept router of a messenger over several loops (docs/messenger.md, Threading):
// loop 0 peeks at every accepted TCP connection for its hello; what is no hello is closed
// and counted, never handed to a shard, and the sockets waiting are bounded.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "msg/msg_harness.h"
#include "rmsg/loop_threads.h"
#include "rmsg/messenger.h"
#include "wire/banner.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

// A raw TCP client of the router: what it sends (if anything) and whether it closes.
int raw_connect(const std::string& address) {
  const auto a = SocketAddress::parse(address).value();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, a.sockaddr_ptr(), a.length()) != 0) return -1;
  return fd;
}

// With several loops, loop 0 peeks at every accepted TCP connection: garbage, silence and
// an early close are closed and counted, never handed to a shard.
TEST(MessengerThreads, TheRouterClosesWhatIsNoHello) {
  auto loops = LoopThreads::create(2).value();  // driven by this thread: never started
  MessengerOptions o = quick_reconnect_options(1);
  o.handshake_timeout = 100ms;
  auto m = Messenger::create(loops->loops(), o, [](NodeId, std::span<const std::byte>) {}).value();
  const auto addr =
      m->listen(SocketAddress::parse("127.0.0.1:0").value(), tcp_params("127.0.0.1:1")).value();
  EventLoop& l0 = loops->loop(0);
  auto value = [&](const char* name) { return m->counters(0).value(name); };

  const int garbage = raw_connect(addr);
  ASSERT_GE(garbage, 0);
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(garbage, http.data(), http.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(http.size()));
  ASSERT_TRUE(l0.run_for([&] { return value("msg.route.malformed") == 1; }, 5s));

  const int early = raw_connect(addr);
  ASSERT_GE(early, 0);
  ::close(early);
  ASSERT_TRUE(l0.run_for([&] { return value("msg.route.closed") == 1; }, 5s));

  const int silent = raw_connect(addr);
  ASSERT_GE(silent, 0);
  ASSERT_TRUE(l0.run_for([&] { return value("msg.route.timeout") == 1; }, 5s));
  char b = 0;
  EXPECT_LE(::recv(silent, &b, 1, 0), 0);  // closed by the router
  EXPECT_LE(::recv(garbage, &b, 1, 0), 0);
  EXPECT_EQ(value("msg.route.routed"), 0u);
  EXPECT_EQ(m->counter_total("msg.accepts"), 0u);
  ::close(garbage);
  ::close(silent);
}

// A routed socket whose peer sent part of a banner and hung up (FIN) can never complete:
// it is closed at once, for a few loop callbacks (a peek of a socket at end of stream
// finds it readable for ever, so waiting for the rest would spin loop 0 until the
// handshake timeout).
TEST(MessengerThreads, TheRouterClosesAPartialBannerThatHungUpAtOnce) {
  auto loops = LoopThreads::create(2).value();  // driven by this thread: never started
  MessengerOptions o = quick_reconnect_options(1);
  o.handshake_timeout = 30s;
  auto m = Messenger::create(loops->loops(), o, [](NodeId, std::span<const std::byte>) {}).value();
  const auto addr =
      m->listen(SocketAddress::parse("127.0.0.1:0").value(), tcp_params("127.0.0.1:1")).value();
  EventLoop& l0 = loops->loop(0);
  auto value = [&](const char* name) { return m->counters(0).value(name); };
  const int fd = raw_connect(addr);
  ASSERT_GE(fd, 0);
  const std::string part = "rmsg-msg\x01";  // the magic and one byte more, then FIN
  ASSERT_EQ(::send(fd, part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
  ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
  const auto t0 = l0.now();
  const std::uint64_t before = l0.counters().value("loop.callbacks");
  ASSERT_TRUE(l0.run_for([&] { return value("msg.route.closed") == 1; }, 2s));
  EXPECT_LE(l0.counters().value("loop.callbacks") - before, 3u);
  EXPECT_LT(l0.now() - t0, o.handshake_timeout);
  char b = 0;
  EXPECT_LE(::recv(fd, &b, 1, 0), 0);  // closed (reset: its bytes were never read)
  ::close(fd);
  // A whole banner the shard would refuse (here its CRC) is refused as soon as it is in,
  // without a hangup, not at the handshake timeout (B3).
  const int bad = raw_connect(addr);
  ASSERT_GE(bad, 0);
  auto banner = wire::encode_banner(wire::Banner{});
  banner[wire::kBannerFixedSize] ^= std::byte{1};
  ASSERT_EQ(::send(bad, banner.data(), banner.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(banner.size()));
  const auto t1 = l0.now();
  ASSERT_TRUE(l0.run_for([&] { return value("msg.route.malformed") == 1; }, 2s));
  EXPECT_LT(l0.now() - t1, o.handshake_timeout);
  ::close(bad);
}

// A flood of silent connections holds at most max_accepts_waiting sockets: each one more
// closes the one that has waited longest.
TEST(MessengerThreads, TheRouterBoundsTheSocketsWaitingForAHello) {
  auto loops = LoopThreads::create(2).value();  // driven by this thread: never started
  MessengerOptions o = quick_reconnect_options(1);
  o.handshake_timeout = 30s;
  o.max_accepts_waiting = 4;
  auto m = Messenger::create(loops->loops(), o, [](NodeId, std::span<const std::byte>) {}).value();
  const auto addr =
      m->listen(SocketAddress::parse("127.0.0.1:0").value(), tcp_params("127.0.0.1:1")).value();
  EventLoop& l0 = loops->loop(0);
  auto value = [&](const char* name) { return m->counters(0).value(name); };
  std::vector<int> flood;
  for (int i = 0; i < 10; ++i) {
    flood.push_back(raw_connect(addr));
    ASSERT_GE(flood.back(), 0);
    // One at a time, so that the order of arrival is the order of connects.
    ASSERT_TRUE(
        l0.run_for([&] { return value("msg.route.evicted") == (i < 4 ? 0u : i - 3u); }, 5s));
  }
  ASSERT_TRUE(l0.run_for([&] { return value("msg.route.evicted") == 6; }, 5s));
  for (int i = 0; i < 10; ++i) {
    char b = 0;
    const ssize_t n = ::recv(flood[i], &b, 1, MSG_DONTWAIT);
    if (i < 6) {
      EXPECT_EQ(n, 0) << "socket " << i << " (among the oldest) is still open";
    } else {
      EXPECT_TRUE(n < 0 && errno == EAGAIN) << "socket " << i << " (among the newest) was closed";
    }
    ::close(flood[i]);
  }
  EXPECT_EQ(value("msg.route.timeout"), 0u);
}

}  // namespace
}  // namespace rmsg::testing
