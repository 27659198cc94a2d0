// Peers that break the protocol, written against rdma-core directly (raw_peer.h): they
// fail only their own stream, with a clear error, and are refused at the handshake.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "kit/raw_peer.h"
#include "kit/rdma_fixture.h"
#include "rdma/wire.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
namespace wire = rmsg::rdma::wire;

class RdmaBadPeer : public RdmaTest {
 protected:
  std::vector<std::byte> hello(std::uint8_t version = wire::kVersion) {
    wire::Hello h;
    h.kind = wire::HelloKind::request;
    h.version = version;
    h.recv_block_size = 16384;
    h.recv_block_count = 16;
    h.send_block_size = 16384;
    h.send_block_count = 16;
    const auto b = wire::encode_hello(h);
    return {b.begin(), b.end()};
  }
};

TEST_F(RdmaBadPeer, OversizedSendFailsOnlyThatStream) {
  RdmaOptions opts = test_options();
  opts.recv_block_size = 4096;
  Stream good_client, good_server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(opts, opts, good_client, good_server));

  SocketAddress server = address();
  server.set_port(listener_.port());
  RawClient raw;
  std::atomic<int> phase{0};
  int connect_event = -1, send_status = -1;
  // The raw peer sends only once the server stream was handed over: an oversized SEND that
  // arrives before the server saw ESTABLISHED fails the stream during setup, and a stream
  // that fails during setup is never accepted (that race made this test flaky).
  std::promise<void> go;
  std::thread peer([&, go_now = go.get_future()]() mutable {
    connect_event = raw.connect(server, hello());
    phase = 1;
    loop().post([] {});
    if (connect_event == RDMA_CM_EVENT_ESTABLISHED) {
      go_now.wait();
      // 8 KiB into a 4 KiB receive block: the negotiated limit broken.
      send_status = raw.send(8192, wire::encode_imm(wire::MsgType::data, 0));
    }
    phase = 2;
    loop().post([] {});  // wakes the loop so that it sees the phase
  });
  const bool accepted = loop().run_for(
      [&] {
        return !accepted_.empty() || (phase >= 1 && connect_event != RDMA_CM_EVENT_ESTABLISHED);
      },
      30s);
  go.set_value();
  if (!accepted || accepted_.empty()) {
    peer.join();
    FAIL() << "raw peer not accepted: event " << connect_event << " " << raw.error;
  }
  Stream bad = std::move(accepted_.back());
  accepted_.pop_back();
  std::array<std::byte, 64> buf{};
  Result<std::size_t> r = Errc::would_block;
  const bool failed = loop().run_for(
      [&] {
        r = bad.read(buf);
        return !r.is(Errc::would_block);
      },
      30s);
  loop().run_for([&] { return phase == 2; }, 30s);
  peer.join();
  ASSERT_TRUE(failed) << "the oversized message went unnoticed";
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().category(), wc_category()) << r.error().message();
  // The receive block is too small for the message: mlx5 reports a local length error,
  // rxe a local QP operation error.
  EXPECT_TRUE(r.error().value() == IBV_WC_LOC_LEN_ERR || r.error().value() == IBV_WC_LOC_QP_OP_ERR)
      << r.error().message();
  EXPECT_EQ(bad.error(), r.error());
  std::printf("bad stream: %s; raw sender saw wc status %d (%s)\n", r.error().message().c_str(),
              send_status,
              send_status >= 0 ? ibv_wc_status_str(static_cast<ibv_wc_status>(send_status))
                               : raw.error.c_str());
  // The other stream on the same loop carries on, byte-exact.
  const auto seed = fresh_seed("good stream after a bad one");
  const auto data = random_bytes(1u << 20, seed);
  Writer w(good_client, data, seed + 1, 50000, true);
  Reader rd(good_server, seed + 2, 20000);
  ASSERT_TRUE(loop().run_for([&] { return rd.eof || rd.error || w.error; }, 60s));
  ASSERT_FALSE(rd.error || w.error);
  EXPECT_TRUE(rd.got == data);
}

TEST_F(RdmaBadPeer, OtherVersionIsRejectedWithOurVersion) {
  auto l = rdma_listen(loop(), address(), test_options(), [](Stream) { ADD_FAILURE(); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  SocketAddress server = address();
  server.set_port(l->port());
  RawClient raw;
  std::atomic<bool> done{false};
  int event = -1;
  std::thread peer([&] {
    event = raw.connect(server, hello(wire::kVersion + 1));
    done = true;
    loop().post([] {});
  });
  loop().run_for([&] { return done.load(); }, 30s);
  peer.join();
  ASSERT_EQ(event, RDMA_CM_EVENT_REJECTED) << raw.error;
  auto reply = wire::decode_hello(raw.event_data);
  ASSERT_TRUE(reply.ok()) << reply.error().message();
  EXPECT_EQ(reply->kind, wire::HelloKind::reject);
  EXPECT_EQ(reply->reason, wire::RejectReason::version);
  EXPECT_EQ(reply->version, wire::kVersion);
}

TEST_F(RdmaBadPeer, RequestWithoutHelloIsRejected) {
  auto l = rdma_listen(loop(), address(), test_options(), [](Stream) { ADD_FAILURE(); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  SocketAddress server = address();
  server.set_port(l->port());
  RawClient raw;
  std::atomic<bool> done{false};
  int event = -1;
  std::thread peer([&] {
    event = raw.connect(server, {});
    done = true;
    loop().post([] {});
  });
  loop().run_for([&] { return done.load(); }, 30s);
  peer.join();
  ASSERT_EQ(event, RDMA_CM_EVENT_REJECTED) << raw.error;
  auto reply = wire::decode_hello(raw.event_data);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->reason, wire::RejectReason::malformed);
}

}  // namespace
}  // namespace rmsg::testing
