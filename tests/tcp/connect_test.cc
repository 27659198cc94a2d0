// Connection setup: asynchronous completion, refusal, timeout, bad addresses, listeners.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kit/tcp_fixture.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
using testing::TcpTest;

// A port that nothing listens on and nothing else can take while the test runs: a socket
// bound to it but not listening.
struct ReservedPort {
  int fd = -1;
  std::uint16_t port = 0;
  ReservedPort() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port = ntohs(a.sin_port);
  }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  ~ReservedPort() { ::close(fd); }
};

std::string text_of(Stream& s, std::size_t n, EventLoop& loop) {
  std::string out;
  loop.run_for(
      [&] {
        char buf[64];
        auto r = s.read(buf, sizeof buf);
        if (r.ok()) out.append(buf, *r);
        return out.size() >= n || (!r.ok() && !r.is(Errc::would_block));
      },
      5s);
  return out;
}

TEST_F(TcpTest, ClientAndServerOnOneLoopThreadExchangeData) {
  listen();
  bool in_call = true;
  bool called_inside = false;
  std::optional<Result<Stream>> client;
  tcp_connect(loop(), loopback(listener_.port()), {}, [&](Result<Stream> r) {
    called_inside = in_call;
    client.emplace(std::move(r));
  });
  in_call = false;
  ASSERT_FALSE(client.has_value()) << "the callback must not run inside tcp_connect";
  ASSERT_TRUE(loop().run_for([&] { return client && !accepted_.empty(); }, 5s));
  EXPECT_FALSE(called_inside);
  ASSERT_TRUE(client->ok()) << client->error().message();
  Stream c = std::move(*client).value();
  Stream s = std::move(accepted_.front());

  EXPECT_STREQ(c.transport(), "tcp");
  EXPECT_EQ(c.peer_address(), "127.0.0.1:" + std::to_string(listener_.port()));
  EXPECT_EQ(s.peer_address(), c.local_address());
  EXPECT_EQ(s.local_address(), c.peer_address());

  ASSERT_EQ(c.write("ping", 4).value(), 4u);
  EXPECT_EQ(text_of(s, 4, loop()), "ping");
  ASSERT_EQ(s.write("pong!", 5).value(), 5u);
  EXPECT_EQ(text_of(c, 5, loop()), "pong!");
  EXPECT_FALSE(c.error());
  EXPECT_FALSE(s.error());
}

TEST_F(TcpTest, ConnectToClosedPortIsRefused) {
  ReservedPort reserved;
  std::optional<Result<Stream>> r;
  tcp_connect(loop(), loopback(reserved.port), {},
              [&](Result<Stream> x) { r.emplace(std::move(x)); });
  ASSERT_TRUE(loop().run_for([&] { return r.has_value(); }, 5s));
  ASSERT_FALSE(r->ok());
  EXPECT_TRUE(r->is(Errc::connection_refused)) << r->error().message();
  EXPECT_TRUE(is_retryable(r->error()));
}

TEST_F(TcpTest, ConnectTimesOutWhenTheServerNeverAnswers) {
  // A listener with backlog 0 that never accepts: the first handshake fills its accept
  // queue and the kernel drops every later SYN, so those connects hang until our deadline.
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 0), 0);
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);

  TcpOptions opt;
  opt.connect_timeout = 300ms;
  std::vector<Result<Stream>> results;
  constexpr int kConnects = 3;
  const auto start = Clock::now();
  for (int i = 0; i < kConnects; ++i) {
    tcp_connect(loop(), loopback(ntohs(a.sin_port)), opt,
                [&](Result<Stream> r) { results.push_back(std::move(r)); });
  }
  ASSERT_TRUE(loop().run_for([&] { return results.size() == kConnects; }, 10s));
  int timeouts = 0;
  for (auto& r : results) {
    if (!r.ok()) {
      EXPECT_TRUE(r.is(Errc::timeout)) << r.error().message();
      ++timeouts;
    }
  }
  EXPECT_GE(timeouts, 1);
  EXPECT_GE(Clock::now() - start, 300ms);
  ::close(lfd);
}

TEST_F(TcpTest, InvalidAddressFailsClearly) {
  std::optional<Result<Stream>> r;
  tcp_connect(loop(), SocketAddress{}, {}, [&](Result<Stream> x) { r.emplace(std::move(x)); });
  ASSERT_FALSE(r.has_value());
  ASSERT_TRUE(loop().run_for([&] { return r.has_value(); }, 5s));
  EXPECT_TRUE(r->is(Errc::invalid_argument));

  auto l = tcp_listen(loop(), SocketAddress{}, {}, [](Stream) {});
  EXPECT_TRUE(l.is(Errc::invalid_argument));
}

TEST_F(TcpTest, ListenOnABusyPortFails) {
  listen();
  auto again = tcp_listen(loop(), loopback(listener_.port()), {}, [](Stream) {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error(), errno_code(EADDRINUSE));
}

TEST_F(TcpTest, ClosedListenerRefusesConnections) {
  listen();
  const auto port = listener_.port();
  listener_.close();
  std::optional<Result<Stream>> r;
  tcp_connect(loop(), loopback(port), {}, [&](Result<Stream> x) { r.emplace(std::move(x)); });
  ASSERT_TRUE(loop().run_for([&] { return r.has_value(); }, 5s));
  EXPECT_TRUE(r->is(Errc::connection_refused)) << r->error().message();
}

TEST_F(TcpTest, Ipv6Loopback) {
  const auto any6 = SocketAddress::parse("[::1]:0").value();
  auto l = tcp_listen(loop(), any6, {}, [&](Stream s) { accepted_.push_back(std::move(s)); });
  if (!l.ok() &&
      (l.error() == errno_code(EADDRNOTAVAIL) || l.error() == errno_code(EAFNOSUPPORT))) {
    GTEST_SKIP() << "no IPv6 loopback here: " << l.error().message();
  }
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->local_address(), "[::1]:" + std::to_string(l->port()));
  auto to = any6;
  to.set_port(l->port());
  std::optional<Result<Stream>> r;
  tcp_connect(loop(), to, {}, [&](Result<Stream> x) { r.emplace(std::move(x)); });
  ASSERT_TRUE(loop().run_for([&] { return r && !accepted_.empty(); }, 5s));
  ASSERT_TRUE(r->ok()) << r->error().message();
  ASSERT_EQ((*r)->write("v6", 2).value(), 2u);
  EXPECT_EQ(text_of(accepted_.front(), 2, loop()), "v6");
}

TEST_F(TcpTest, AcceptCallbackMayCloseTheListener) {
  auto l = tcp_listen(loop(), loopback(), {}, [&](Stream s) {
    accepted_.push_back(std::move(s));
    listener_ = Listener();  // destroys the listener from inside its own callback
  });
  ASSERT_TRUE(l.ok());
  const auto port = l->port();
  listener_ = std::move(l).value();
  std::vector<Result<Stream>> results;
  for (int i = 0; i < 2; ++i) {
    tcp_connect(loop(), loopback(port), {},
                [&](Result<Stream> r) { results.push_back(std::move(r)); });
  }
  ASSERT_TRUE(loop().run_for([&] { return results.size() == 2 && !accepted_.empty(); }, 5s));
  EXPECT_EQ(accepted_.size(), 1u);
  EXPECT_FALSE(listener_.valid());
}

}  // namespace
}  // namespace rmsg
