// Back-pressure: partial writes, would-block, slow readers; credits keep RNR at zero.
#include <gtest/gtest.h>

#include "kit/rdma_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class RdmaFlow : public RdmaTest {};

RdmaOptions small_rings() {
  RdmaOptions o = test_options();
  o.send_block_size = 4096;
  o.send_block_count = 4;
  o.recv_block_size = 4096;
  o.recv_block_count = 4;
  return o;
}

TEST_F(RdmaFlow, PartialWritesFinishLater) {
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(small_rings(), small_rings(), client, server));
  const auto seed = fresh_seed("partial writes");
  const auto data = random_bytes(1u << 20, seed);
  // One big write takes at most what the credits and the ring allow.
  auto first = client.write(data);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_LT(first.value(), data.size());
  EXPECT_LE(first.value(), 4u * 4096);
  // Nobody reads: the writer runs into would-block and stays there.
  std::size_t offset = first.value();
  loop().run_for([] { return false; }, 200ms);
  for (;;) {
    auto r = client.write(std::span(data).subspan(offset));
    if (!r) {
      ASSERT_TRUE(r.is(Errc::would_block)) << r.error().message();
      break;
    }
    offset += r.value();
    ASSERT_LT(offset, data.size()) << "the writer was never pushed back";
    loop().run_for([] { return false; }, 20ms);
  }
  // The reader starts; the rest goes through writable readiness.
  Writer w(client, std::span(data).subspan(offset), seed + 1, 100000, true);
  Reader r(server, seed + 2, 30000);
  ASSERT_TRUE(loop().run_for([&] { return r.eof || r.error || w.error; }, 60s));
  ASSERT_FALSE(w.error) << w.error.message();
  ASSERT_FALSE(r.error) << r.error.message();
  EXPECT_TRUE(r.got == data);
  EXPECT_GT(w.would_blocks + w.partial_writes, 0u);
}

TEST_F(RdmaFlow, SlowReaderCausesNoRnr) {
  const long long rnr_before = rnr_counter_sum();
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(small_rings(), small_rings(), client, server));
  const auto seed = fresh_seed("slow reader");
  const auto data = random_bytes(512u * 1024, seed);
  Writer w(client, data, seed + 1, 64 * 1024, true);
  Reader r(server, seed + 2, 3000, /*armed=*/false);
  // The reader takes at most 3000 bytes every 2 ms: the writer must wait for credits.
  const TimerId tick = loop().add_periodic(2ms, [&] { r.read_some(3000); });
  ASSERT_TRUE(loop().run_for([&] { return r.eof || r.error || w.error; }, 90s))
      << r.got.size() << " bytes read";
  loop().cancel_timer(tick);
  ASSERT_FALSE(w.error) << w.error.message();
  ASSERT_FALSE(r.error) << r.error.message();
  EXPECT_TRUE(r.got == data);
  auto info = rdma_stream_info(client);
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->credit_stalls, 0u) << "the reader never pushed back";
  EXPECT_GT(rdma_stream_info(server)->credit_messages_sent, 0u);
  const long long rnr_after = rnr_counter_sum();
  if (rnr_before >= 0 && rnr_after >= 0) {
    EXPECT_EQ(rnr_after, rnr_before) << "RNR NAKs were counted by the device";
  } else {
    std::printf("rxe RNR counters not readable; relying on rnr_retry_count 0\n");
  }
}

}  // namespace
}  // namespace rmsg::testing
