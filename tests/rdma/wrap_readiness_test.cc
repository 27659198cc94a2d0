// Groundwork II on real verbs: a stream whose ring indices and structure generation start
// just before their wraps moves MiBs byte-exact across them (non-power-of-two rings);
// an idle stream's readiness callbacks run a bounded number of times, not once per loop
// iteration; and credits that read() takes in wake a writer waiting in on_writable.
#include <gtest/gtest.h>

#include <vector>

#include "kit/rdma_fixture.h"
#include "rdma/seams.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

RdmaOptions ring(std::uint32_t block, std::uint32_t send_blocks, std::uint32_t recv_blocks) {
  RdmaOptions o = test_options();
  o.send_block_size = block;
  o.recv_block_size = block;
  o.send_block_count = send_blocks;
  o.recv_block_count = recv_blocks;
  o.keepalive_interval = 0ms;  // an idle stream really is idle
  o.idle_timeout = 0ms;
  return o;
}

// Resets the seam whatever the test's outcome.
struct RingStartGuard {
  explicit RingStartGuard(const rdma::RingStart& s) { rdma::set_ring_start(s); }
  ~RingStartGuard() { rdma::set_ring_start({}); }
  RingStartGuard(const RingStartGuard&) = delete;
  RingStartGuard& operator=(const RingStartGuard&) = delete;
};

class RdmaWrap : public RdmaTest {};

// ASan: a quarter of the bytes, still 25 rounds of the rings past their wraps.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kBulkDivisor = 4;
#else
constexpr std::size_t kBulkDivisor = 1;
#endif

// 7 send blocks (SQ depth 9, which divides no power of two) and 5 receive blocks; the
// send block and WR slot start two steps before index 0, the generation at 0xFFFF (its
// next use wraps to 1) and at 0xFFFE. 3 MiB each way (ASan: 768 KiB), byte-exact.
TEST_F(RdmaWrap, TransfersByteExactAcrossTheWraps) {
  for (const std::uint16_t gen : {std::uint16_t{0xFFFE}, std::uint16_t{0xFFFF}}) {
    SCOPED_TRACE(gen);
    const RingStartGuard guard({5, 7, gen});
    const RdmaOptions opts = ring(4000, 7, 5);
    Stream client, server;
    ASSERT_NO_FATAL_FAILURE(connect_pair(opts, opts, client, server));
    const auto up = random_bytes((3u << 20) / kBulkDivisor, fresh_seed("wrap up"));
    const auto down = random_bytes((3u << 20) / kBulkDivisor, fresh_seed("wrap down"));
    Writer wu(client, up, 1, 9000, true);
    Writer wd(server, down, 2, 9000, true);
    Reader ru(server, 3, 7000);
    Reader rd(client, 4, 7000);
    ASSERT_TRUE(loop().run_for([&] { return ru.eof && rd.eof; }, 60s))
        << "up " << ru.got.size() << " down " << rd.got.size();
    EXPECT_FALSE(wu.error || wd.error || ru.error || rd.error);
    EXPECT_TRUE(ru.got == up) << "client to server bytes differ";
    EXPECT_TRUE(rd.got == down) << "server to client bytes differ";
    const auto info = rdma_stream_info(client).value();
    // the 7 blocks went round 100 times (25 under ASan)
    EXPECT_GT(info.data_messages_sent, 700u / kBulkDivisor);
  }
}

class RdmaReadiness : public RdmaTest {};

// An established, idle stream with both callbacks set: on_writable runs once (it became
// writable), on_readable never (nothing to read); neither again while nothing changes.
TEST_F(RdmaReadiness, IdleStreamGetsBoundedCallbacks) {
  const RdmaOptions opts = ring(4096, 8, 8);
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(opts, opts, client, server));
  int writable[2] = {0, 0};
  int readable[2] = {0, 0};
  Stream* streams[2] = {&client, &server};
  for (int i = 0; i < 2; ++i) {
    streams[i]->on_writable([&writable, i] { ++writable[i]; });
    streams[i]->on_readable([&readable, i] { ++readable[i]; });
  }
  EXPECT_FALSE(loop().run_for([] { return false; }, 1s));
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_GE(writable[i], 1);  // it is writable: told so once
    EXPECT_LE(writable[i], 2);
    EXPECT_EQ(readable[i], 0);
  }
  std::printf("idle second: on_writable %d/%d, on_readable %d/%d calls\n", writable[0], writable[1],
              readable[0], readable[1]);
  // A change is reported again: data makes the server readable (once per progress).
  ASSERT_TRUE(client.write(std::as_bytes(std::span("x", 1))));
  EXPECT_TRUE(loop().run_for([&] { return readable[1] > 0; }, 5s));
  EXPECT_FALSE(loop().run_for([] { return false; }, 200ms));
  EXPECT_EQ(readable[1], 1) << "an unread byte is reported once, not per iteration";
  for (auto* s : streams) {
    s->on_writable({});
    s->on_readable({});
  }
}

// stream.h: on_writable fires when write() would report an error; after shutdown_write()
// write() reports Errc::shutdown, so on_writable runs once more, and not again.
TEST_F(RdmaReadiness, ShutdownWriteMakesItWritableOnce) {
  const RdmaOptions opts = ring(4096, 8, 8);
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(opts, opts, client, server));
  int calls = 0;
  client.on_writable([&] { ++calls; });
  ASSERT_TRUE(loop().run_for([&] { return calls > 0; }, 5s));
  EXPECT_FALSE(loop().run_for([] { return false; }, 100ms));
  const int before = calls;
  ASSERT_TRUE(client.shutdown_write());
  EXPECT_TRUE(loop().run_for([&] { return calls > before; }, 5s));
  EXPECT_TRUE(client.write(std::as_bytes(std::span("x", 1))).is(Errc::shutdown));
  EXPECT_FALSE(loop().run_for([] { return false; }, 200ms));
  EXPECT_LE(calls, before + 2);
  client.on_writable({});
}

// The client writes until the server's 4 receives are used (its credits fall below 2).
// The server reads everything inside one timer callback, which sends the client a
// credit message; in the same callback the client's app calls read() until that message
// was taken in (it polls the receive CQ), before the loop sees the CQ's event. The
// writer waiting in on_writable must still be woken and finish.
TEST_F(RdmaReadiness, CreditsTakenInByReadWakeTheWriter) {
  const RdmaOptions client_opts = ring(4096, 8, 8);
  const RdmaOptions server_opts = ring(4096, 8, 4);
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(client_opts, server_opts, client, server));
  const auto data = random_bytes(64 << 10, fresh_seed("lost wakeup"));
  Writer writer(client, data, 5, 4096, false);
  auto credits = [&] { return rdma_stream_info(client).value().credits; };
  ASSERT_TRUE(loop().run_for([&] { return writer.would_blocks > 0 && credits() < 2; }, 5s));
  // What the writer took beyond its credits waits staged in its send blocks (SendRing):
  // only the rest was posted.
  const std::size_t sent = writer.offset - rdma_stream_counters(client)->value("bytes_staged");
  ASSERT_LT(sent, data.size());
  const auto sends = [&] { return rdma_stream_info(client).value().data_messages_sent; };
  const auto sends_before = sends();
  std::vector<std::byte> got;
  bool took_credits = false;
  loop().add_timer(1ms, [&] {
    std::vector<std::byte> buf(64 << 10);
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (got.size() < sent && std::chrono::steady_clock::now() < until) {
      if (auto r = server.read(buf); r && r.value() > 0)
        got.insert(got.end(), buf.begin(), buf.begin() + r.value());
    }
    // Taking in the credit message either leaves credits or spends them at once on the
    // staged blocks.
    while (credits() < 2 && sends() == sends_before && std::chrono::steady_clock::now() < until) {
      std::byte b[16];
      (void)client.read(b);  // would_block: only the credit message is there
    }
    took_credits = credits() >= 2 || sends() > sends_before;
  });
  ASSERT_TRUE(loop().run_for([&] { return took_credits; }, 10s));
  ASSERT_EQ(got.size(), sent);
  Reader reader(server, 6, 64 << 10);
  EXPECT_TRUE(loop().run_for([&] { return writer.done; }, 10s))
      << "the writer was not woken: " << writer.offset << " of " << data.size();
  EXPECT_FALSE(writer.error);
  ASSERT_TRUE(loop().run_for([&] { return got.size() + reader.got.size() == data.size(); }, 10s));
  got.insert(got.end(), reader.got.begin(), reader.got.end());
  EXPECT_TRUE(got == data);
}

}  // namespace
}  // namespace rmsg::testing
