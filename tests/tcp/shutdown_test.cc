// Orderly shutdown versus abortive close, and the errors each side sees afterwards.
#include <string>
#include <tuple>
#include <vector>

#include "kit/pattern.h"
#include "kit/seed.h"
#include "kit/tcp_fixture.h"

namespace rmsg {
namespace {

using testing::Pattern;
using namespace std::chrono_literals;
using testing::TcpTest;

// Reads until EOF or an error; returns the bytes and the terminating result.
std::pair<std::string, std::error_code> drain(EventLoop& loop, Stream& s) {
  std::string out;
  std::error_code ec;
  bool eof = false;
  s.on_readable([&] {
    char buf[65536];
    auto r = s.read(buf, sizeof buf);
    if (r.ok() && *r == 0) eof = true;
    if (r.ok()) out.append(buf, *r);
    if (!r.ok() && !r.is(Errc::would_block)) ec = r.error();
  });
  EXPECT_TRUE(loop.run_for([&] { return eof || ec; }, 10s));
  s.on_readable({});
  return {out, ec};
}

TEST_F(TcpTest, OrderlyShutdownDeliversEveryByteBeforeEof) {
  auto [client, server] = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  // Queue as much as the socket takes, so bytes are still in flight when we shut down.
  const Pattern pattern(testing::seed_for("tcp shutdown"));
  std::uint64_t sent = 0;
  for (;;) {
    auto n = client.write(pattern.at(sent, 65536));
    if (!n) {
      ASSERT_TRUE(n.is(Errc::would_block)) << n.error().message();
      break;
    }
    sent += *n;
  }
  ASSERT_TRUE(client.shutdown_write().ok());
  EXPECT_TRUE(client.shutdown_write().ok()) << "shutdown_write is idempotent";
  EXPECT_TRUE(client.write("x", 1).is(Errc::shutdown));

  auto [data, ec] = drain(loop(), server);
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_EQ(data.size(), sent);
  EXPECT_TRUE(pattern.matches(0, std::as_bytes(std::span(data))));
  char b;
  EXPECT_EQ(server.read(&b, 1).value(), 0u) << "EOF stays EOF";

  // Half-close: the server still talks back, then finishes its own side.
  ASSERT_EQ(server.write("bye", 3).value(), 3u);
  ASSERT_TRUE(server.shutdown_write().ok());
  auto [reply, ec2] = drain(loop(), client);
  EXPECT_FALSE(ec2) << ec2.message();
  EXPECT_EQ(reply, "bye");
  EXPECT_FALSE(client.error());
  EXPECT_FALSE(server.error());
}

TEST_F(TcpTest, PeerAbortIsConnectionReset) {
  auto [client, server] = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  ASSERT_EQ(client.write("unread", 6).value(), 6u);
  server.close();  // abortive: RST
  EXPECT_TRUE(server.read(nullptr, 1).is(Errc::closed));
  EXPECT_TRUE(server.write("x", 1).is(Errc::closed));
  EXPECT_TRUE(server.shutdown_write().is(Errc::closed));
  EXPECT_EQ(server.error(), make_error_code(Errc::closed));

  auto [data, ec] = drain(loop(), client);
  EXPECT_EQ(ec, make_error_code(Errc::connection_reset)) << ec.message();
  EXPECT_FALSE(is_retryable(ec));
  // The first failure sticks: every later call reports it.
  EXPECT_EQ(client.error(), make_error_code(Errc::connection_reset));
  EXPECT_TRUE(client.write("x", 1).is(Errc::connection_reset));
  char b;
  EXPECT_TRUE(client.read(&b, 1).is(Errc::connection_reset));
}

TEST_F(TcpTest, DestroyingAStreamResetsThePeer) {
  // Named streams, not a structured binding: the lambdas below capture them, which clang 14
  // does not implement for bindings (C++20 P1381; clang has it from 16).
  Stream client;
  Stream server;
  std::tie(client, server) = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  client = Stream();
  // The server learns it through writability too, not only through reads.
  std::error_code ec;
  server.on_writable([&] {
    auto r = server.write("x", 1);
    if (!r.ok()) ec = r.error();
  });
  ASSERT_TRUE(loop().run_for([&] { return bool(ec); }, 10s));
  EXPECT_EQ(ec, make_error_code(Errc::connection_reset)) << ec.message();
}

TEST_F(TcpTest, CallbackMayDestroyItsStream) {
  auto [client, server] = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  auto owned = std::make_unique<Stream>(std::move(server));
  int calls = 0;
  owned->on_readable([&] {
    ++calls;
    owned.reset();
  });
  owned->on_writable([&] {
    if (calls > 0) ADD_FAILURE() << "ran after its stream was destroyed";
  });
  ASSERT_EQ(client.write("a", 1).value(), 1u);
  ASSERT_TRUE(loop().run_for([&] { return owned == nullptr; }, 5s));
  loop().run_for([] { return false; }, 20ms);
  EXPECT_EQ(calls, 1);
}

TEST_F(TcpTest, EmptyBuffersAreInvalid) {
  auto [client, server] = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  EXPECT_TRUE(client.write(std::span<const std::byte>{}).is(Errc::invalid_argument));
  EXPECT_TRUE(client.read(std::span<std::byte>{}).is(Errc::invalid_argument));
  char b;
  EXPECT_TRUE(client.read(&b, 1).is(Errc::would_block));
}

}  // namespace
}  // namespace rmsg
