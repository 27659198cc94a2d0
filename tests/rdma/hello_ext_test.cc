// The hello's extension block on the wire (docs/protocol.md): a peer without one (today's
// 32 bytes) connects and gets 32 bytes back, a peer with unknown fields and feature bits
// connects, a malformed block is rejected as malformed, and feature bits that both sides
// set are negotiated.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kit/raw_peer.h"
#include "kit/rdma_fixture.h"
#include "rdma/seams.h"
#include "rdma/wire.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
namespace wire = rdma::wire;

std::vector<std::byte> request_hello() {
  wire::Hello h;
  h.kind = wire::HelloKind::request;
  h.recv_block_size = 16384;
  h.recv_block_count = 16;
  h.send_block_size = 16384;
  h.send_block_count = 16;
  const auto b = wire::encode_hello(h);
  return {b.begin(), b.end()};
}

// `hello` with `block` appended as its extension block (length raised to cover it).
std::vector<std::byte> with_block(std::vector<std::byte> hello, std::initializer_list<int> block) {
  for (const int b : block) hello.push_back(static_cast<std::byte>(b));
  hello[5] = static_cast<std::byte>(hello.size());
  return hello;
}

class RdmaHelloExtension : public RdmaTest {
 protected:
  void TearDown() override { rdma::set_extra_hello_features(0); }

  // A raw client connects with `private_data` to a listener of ours: the CM event that
  // ended its handshake (reply in raw_.event_data); accepted streams land in accepted_.
  int raw_connect(std::span<const std::byte> private_data) {
    auto l = rdma_listen(loop(), address(), test_options(),
                         [this](Stream s) { accepted_.push_back(std::move(s)); });
    EXPECT_TRUE(l.ok()) << l.error().message();
    if (!l) return -1;
    listener_ = std::move(l).value();
    SocketAddress server = address();
    server.set_port(listener_.port());
    std::atomic<bool> done{false};
    int event = -1;
    std::thread peer([&] {
      event = raw_.connect(server, private_data);
      done = true;
      loop().post([] {});
    });
    loop().run_for([&] { return done.load(); }, 30s);
    peer.join();
    if (event == RDMA_CM_EVENT_ESTABLISHED) {
      loop().run_for([&] { return !accepted_.empty(); }, 10s);
    }
    return event;
  }

  RawClient raw_;
};

TEST_F(RdmaHelloExtension, OlderPeersHelloConnectsAndGetsA32ByteHello) {
  const auto hello = request_hello();
  ASSERT_EQ(hello.size(), 32u);
  ASSERT_EQ(raw_connect(hello), RDMA_CM_EVENT_ESTABLISHED) << raw_.error;
  ASSERT_EQ(accepted_.size(), 1u);
  ASSERT_GE(raw_.event_data.size(), 32u);  // the CM pads the reply to its own size
  EXPECT_EQ(raw_.event_data[5], std::byte{32}) << "the accept carries an extension block";
  auto reply = wire::decode_hello(raw_.event_data);
  ASSERT_TRUE(reply.ok()) << reply.error().message();
  EXPECT_EQ(reply->kind, wire::HelloKind::accept);
  EXPECT_EQ(reply->features, 0u);
  EXPECT_EQ(rdma::stream_features(accepted_.front()), 0u);
}

TEST_F(RdmaHelloExtension, UnknownFieldsAndFeatureBitsAreIgnored) {
  // An unknown field of 3 bytes, then features with a bit no rmsg defines.
  const auto hello = with_block(request_hello(), {0x7F, 0x03, 1, 2, 3, 0x01, 0x04, 0x80, 0, 0, 0});
  ASSERT_EQ(hello.size(), 43u);
  ASSERT_EQ(raw_connect(hello), RDMA_CM_EVENT_ESTABLISHED) << raw_.error;
  ASSERT_EQ(accepted_.size(), 1u);
  EXPECT_EQ(rdma::stream_features(accepted_.front()), 0u);  // we do not set bit 31
  auto reply = wire::decode_hello(raw_.event_data);
  ASSERT_TRUE(reply.ok()) << reply.error().message();
  EXPECT_EQ(reply->features, 0u);
}

TEST_F(RdmaHelloExtension, MalformedBlockIsRejectedAsMalformed) {
  const auto hello = with_block(request_hello(), {0x7F, 0x09, 1});  // runs past the end
  ASSERT_EQ(raw_connect(hello), RDMA_CM_EVENT_REJECTED) << raw_.error;
  EXPECT_TRUE(accepted_.empty());
  auto reply = wire::decode_hello(raw_.event_data);
  ASSERT_TRUE(reply.ok()) << reply.error().message();
  EXPECT_EQ(reply->kind, wire::HelloKind::reject);
  EXPECT_EQ(reply->reason, wire::RejectReason::malformed);
}

// Both sides of one process: the client's stream advertises 0x80000003, the server's
// (made at CONNECT_REQUEST, after the switch) 0x80000001: the common bits are on.
TEST_F(RdmaHelloExtension, FeatureBitsBothSidesSetAreNegotiated) {
  auto l = rdma_listen(loop(), address(), test_options(),
                       [this](Stream s) { accepted_.push_back(std::move(s)); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  listener_ = std::move(l).value();
  SocketAddress peer = address();
  peer.set_port(listener_.port());
  std::optional<Result<Stream>> client;
  rdma::set_extra_hello_features(0x80000003);
  rdma_connect(loop(), peer, test_options(),
               [&](Result<Stream> r) { client.emplace(std::move(r)); });
  rdma::set_extra_hello_features(0x80000001);
  ASSERT_TRUE(loop().run_for([&] { return client && !accepted_.empty(); }, 20s));
  ASSERT_TRUE(client->ok()) << client->error().message();
  Stream& c = client->value();
  Stream& s = accepted_.front();
  EXPECT_EQ(rdma::stream_features(c), 0x80000001u);
  EXPECT_EQ(rdma::stream_features(s), 0x80000001u);
  // Data flows as on any stream.
  ASSERT_TRUE(c.write("hello", 5).ok());
  std::string got;
  ASSERT_TRUE(loop().run_for(
      [&] {
        char buf[16];
        auto r = s.read(buf, sizeof buf);
        if (r && r.value() > 0) got.append(buf, r.value());
        return got.size() >= 5;
      },
      10s));
  EXPECT_EQ(got, "hello");
}

}  // namespace
}  // namespace rmsg::testing
