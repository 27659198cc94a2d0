// Orderly close (FIN after the last byte) versus abortive close, and setup failures.
#include <gtest/gtest.h>

#include "kit/rdma_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class RdmaClose : public RdmaTest {};

TEST_F(RdmaClose, OrderlyCloseDeliversEverythingThenEof) {
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(test_options(), test_options(), client, server));
  const auto seed = fresh_seed("orderly close");
  const auto data = random_bytes((3u << 20) + 5, seed);
  Writer w(client, data, seed + 1, 200000, /*shutdown_at_end=*/true);
  Reader r(server, seed + 2, 50000);
  ASSERT_TRUE(loop().run_for([&] { return r.eof || r.error || w.error; }, 60s));
  ASSERT_FALSE(r.error) << r.error.message();
  EXPECT_TRUE(r.got == data);
  // Our side is shut: writes fail, reads still work; EOF stays EOF.
  std::byte one{1};
  EXPECT_TRUE(client.write(&one, 1).is(Errc::shutdown));
  std::array<std::byte, 8> buf{};
  auto again = server.read(buf);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), 0u);
  // The server answers, then shuts down too: the client reads it all, then EOF.
  const std::string reply = "last words";
  ASSERT_TRUE(server.write(reply.data(), reply.size()).ok());
  ASSERT_TRUE(server.shutdown_write().ok());
  Reader back(client, seed + 3, 3);
  ASSERT_TRUE(loop().run_for([&] { return back.eof || back.error; }, 20s));
  ASSERT_FALSE(back.error) << back.error.message();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(back.got.data()), back.got.size()), reply);
  // Closing after both FINs: the other side keeps its EOF, and no error appears.
  client.close();
  ASSERT_TRUE(loop().run_for([&] { return server.write(&one, 1).is(Errc::shutdown); }, 1s));
  loop().run_for([] { return false; }, 300ms);
  EXPECT_EQ(server.read(buf).value(), 0u);
  EXPECT_FALSE(server.error()) << server.error().message();
}

TEST_F(RdmaClose, AbortiveCloseResetsThePeer) {
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(test_options(), test_options(), client, server));
  client.close();
  EXPECT_TRUE(client.error() == make_error_code(Errc::closed));
  std::array<std::byte, 16> buf{};
  Result<std::size_t> r = Errc::would_block;
  ASSERT_TRUE(loop().run_for(
      [&] {
        r = server.read(buf);
        return !r.is(Errc::would_block);
      },
      20s));
  EXPECT_TRUE(r.is(Errc::connection_reset)) << (r ? "data/EOF" : r.error().message());
  EXPECT_TRUE(server.write(buf).is(Errc::connection_reset));
}

TEST_F(RdmaClose, WriterAfterPeerLeftGetsPeerClosed) {
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(test_options(), test_options(), client, server));
  ASSERT_TRUE(client.shutdown_write().ok());
  std::array<std::byte, 16> buf{};
  ASSERT_TRUE(loop().run_for([&] { return server.read(buf).ok(); }, 20s));  // EOF
  client.close();
  Result<std::size_t> w = std::size_t{0};
  ASSERT_TRUE(loop().run_for(
      [&] {
        w = server.write(buf);
        return !w.ok() && !w.is(Errc::would_block);
      },
      20s));
  EXPECT_TRUE(w.is(Errc::peer_closed)) << w.error().message();
  EXPECT_EQ(server.read(buf).value(), 0u);  // still EOF, not an error
}

TEST_F(RdmaClose, ConnectWithNoListenerIsRefusedPromptly) {
  // A port nothing listens on: bind a listener, note its port, close it.
  std::uint16_t port = 0;
  {
    auto l = rdma_listen(loop(), address(), test_options(), [](Stream) {});
    ASSERT_TRUE(l.ok()) << l.error().message();
    port = l->port();
  }
  SocketAddress peer = address();
  peer.set_port(port);
  std::error_code err;
  bool done = false;
  const auto start = Clock::now();
  rdma_connect(loop(), peer, test_options(), [&](Result<Stream> r) {
    done = true;
    err = r ? std::error_code{} : r.error();
  });
  ASSERT_TRUE(loop().run_for([&] { return done; }, 20s));
  EXPECT_TRUE(err == make_error_code(Errc::connection_refused) ||
              err == make_error_code(Errc::rejected))
      << err.message();
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST_F(RdmaClose, BadGeometryIsInvalidArgument) {
  RdmaOptions o = test_options();
  o.recv_block_count = 2;  // below the credit protocol's minimum
  EXPECT_TRUE(rdma_listen(loop(), address(), o, [](Stream) {}).is(Errc::invalid_argument));
  bool done = false;
  rdma_connect(loop(), address(), o, [&](Result<Stream> r) {
    done = true;
    EXPECT_TRUE(r.is(Errc::invalid_argument));
  });
  EXPECT_FALSE(done);
  EXPECT_TRUE(loop().run_for([&] { return done; }, 1s));
}

}  // namespace
}  // namespace rmsg::testing
