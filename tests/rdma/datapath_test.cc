// The data path over real verbs: a 64-byte ping-pong under each completion mode
// (adaptive polling, events only, busy polling) is byte-exact with one SEND per message;
// small writes stalled on credits share blocks; idle streams cost their loop no wakeups.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kit/rdma_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

enum class Mode { adaptive, events, busy };

RdmaOptions datapath_options() {
  RdmaOptions o = test_options();
  o.retry_count = 6;  // rxe retries for ever at 7
  o.keepalive_interval = 0ms;
  o.idle_timeout = 0ms;
  return o;
}

class RdmaDatapath : public RdmaTest {
 protected:
  // Replaces the fixture's loop (before any stream exists) with one in `mode`.
  void use_mode(Mode mode) {
    EventLoopOptions options;
    if (mode == Mode::events) options.poll_spin = Duration::zero();
    auto l = EventLoop::create(options);
    ASSERT_TRUE(l.ok());
    loop_ = std::move(l).value();
    loop_->set_busy_poll(mode == Mode::busy);
  }
  std::uint64_t loop_counter(std::string_view name) { return loop().counters().value(name); }

 public:
  void connect(const RdmaOptions& o, Stream& client, Stream& server) {
    connect_pair(o, o, client, server);
  }
};

class RdmaPingPong : public RdmaDatapath, public ::testing::WithParamInterface<Mode> {};

// Client sends 64 bytes, the server echoes them, the client checks them and sends the next.
TEST_P(RdmaPingPong, ByteExactWithOneSendPerMessage) {
  ASSERT_NO_FATAL_FAILURE(use_mode(GetParam()));
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(datapath_options(), datapath_options(), client, server));
  constexpr int kRounds = 300;
  constexpr std::size_t kSize = 64;
  const auto data = random_bytes(kRounds * kSize, fresh_seed("ping-pong"));
  std::array<std::byte, kSize> echo{}, back{};
  std::size_t echo_have = 0, back_have = 0;
  int rounds = 0;
  std::string error;
  auto send_next = [&] {
    auto w = client.write(std::span(data).subspan(rounds * kSize, kSize));
    if (!w || w.value() != kSize) error = "client write did not take 64 bytes";
  };
  server.on_readable([&] {
    auto r = server.read(std::span(echo).subspan(echo_have));
    if (!r) return;
    echo_have += r.value();
    if (echo_have < kSize) return;
    echo_have = 0;
    auto w = server.write(echo);
    if (!w || w.value() != kSize) error = "server echo did not take 64 bytes";
  });
  client.on_readable([&] {
    auto r = client.read(std::span(back).subspan(back_have));
    if (!r) return;
    back_have += r.value();
    if (back_have < kSize) return;
    back_have = 0;
    if (std::memcmp(back.data(), data.data() + rounds * kSize, kSize) != 0) error = "mismatch";
    if (++rounds < kRounds) send_next();
  });
  const auto spins = loop_counter("loop.spins");
  send_next();
  ASSERT_TRUE(loop().run_for([&] { return rounds == kRounds || !error.empty(); }, 60s));
  ASSERT_EQ(error, "");
  EXPECT_EQ(rdma_stream_info(client)->data_messages_sent, std::uint64_t{kRounds});
  EXPECT_EQ(rdma_stream_info(server)->data_messages_sent, std::uint64_t{kRounds});
  EXPECT_EQ(rdma_stream_counters(client)->value("bytes_staged"), 0u) << "nothing waited";
  if (GetParam() == Mode::adaptive) {
    EXPECT_GT(loop_counter("loop.spins"), spins);
  } else {
    EXPECT_EQ(loop_counter("loop.spins"), spins);
  }
  if (GetParam() == Mode::events) {
    EXPECT_GT(loop_counter("loop.arms"), std::uint64_t{kRounds});
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, RdmaPingPong,
                         ::testing::Values(Mode::adaptive, Mode::events, Mode::busy),
                         [](const auto& p) {
                           return std::string(p.param == Mode::adaptive ? "adaptive"
                                              : p.param == Mode::events ? "events"
                                                                        : "busy");
                         });

// 2000 writes of 64 bytes while the peer does not read: the first few go out (one credit
// each), the rest wait in shared blocks and leave in a few SENDs once credits return.
TEST_F(RdmaDatapath, SmallWritesStalledOnCreditsShareBlocks) {
  ASSERT_NO_FATAL_FAILURE(use_mode(Mode::adaptive));
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(datapath_options(), datapath_options(), client, server));
  constexpr std::size_t kWrites = 2000, kSize = 64;
  const auto data = random_bytes(kWrites * kSize, fresh_seed("small writes"));
  for (std::size_t i = 0; i < kWrites; ++i) {
    auto w = client.write(std::span(data).subspan(i * kSize, kSize));
    ASSERT_TRUE(w.ok()) << i << ": " << w.error().message();
    ASSERT_EQ(w.value(), kSize) << i;
  }
  const auto direct = rdma_stream_info(client)->data_messages_sent;
  EXPECT_LE(direct, 8u) << "one SEND per credit at most";
  EXPECT_GT(rdma_stream_counters(client)->value("bytes_staged"), 0u);
  Reader reader(server, fresh_seed("reader"), 4096);
  ASSERT_TRUE(
      loop().run_for([&] { return reader.got.size() >= data.size() || reader.error; }, 30s));
  ASSERT_FALSE(reader.error) << reader.error.message();
  EXPECT_TRUE(reader.got == data);
  // 128,000 bytes in 64 KiB blocks: two SENDs after the direct ones (a third if a block
  // boundary falls badly), instead of 2000.
  EXPECT_LE(rdma_stream_info(client)->data_messages_sent, direct + 3);
}

// A write that fits inline goes out from the caller's bytes and holds no send block: with
// one send block, several small writes in a row all post at once (none waits for the
// block's completion, none is staged), and the bytes arrive in order.
TEST_F(RdmaDatapath, InlineWritesHoldNoSendBlock) {
  ASSERT_NO_FATAL_FAILURE(use_mode(Mode::adaptive));
  RdmaOptions o = datapath_options();
  o.send_block_count = 1;  // SQ depth 3: two data WRs in flight leave one slot for control
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(o, datapath_options(), client, server));
  ASSERT_GE(rdma_stream_info(client)->inline_granted, 64u);
  constexpr std::size_t kWrites = 2, kSize = 64;
  const auto data = random_bytes(kWrites * kSize, fresh_seed("inline writes"));
  const auto before = rdma_stream_info(client)->data_messages_sent;
  for (std::size_t i = 0; i < kWrites; ++i) {
    auto w = client.write(std::span(data).subspan(i * kSize, kSize));
    ASSERT_TRUE(w.ok()) << i << ": " << w.error().message();
    ASSERT_EQ(w.value(), kSize) << i;
  }
  EXPECT_EQ(rdma_stream_info(client)->data_messages_sent - before, kWrites);
  const CounterSet* counters = rdma_stream_counters(client);
  EXPECT_EQ(counters->value("bytes_staged"), 0u);
  EXPECT_GE(counters->value("inline_sends"), kWrites);
  Reader reader(server, fresh_seed("reader"), 4096);
  ASSERT_TRUE(
      loop().run_for([&] { return reader.got.size() >= data.size() || reader.error; }, 30s));
  ASSERT_FALSE(reader.error) << reader.error.message();
  EXPECT_TRUE(reader.got == data);
}

// A writer of random small chunks against a reader that keeps up: credits come and go,
// writes are posted or staged as they come, and every byte arrives once, in order.
TEST_F(RdmaDatapath, MixedPostedAndStagedWritesAreByteExact) {
  ASSERT_NO_FATAL_FAILURE(use_mode(Mode::adaptive));
  RdmaOptions o = datapath_options();
  o.send_block_size = 4096;
  o.recv_block_size = 4096;
  o.send_block_count = 4;
  o.recv_block_count = 4;
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(o, o, client, server));
  const auto data = random_bytes(512 * 1024, fresh_seed("mixed"));
  Writer writer(client, data, fresh_seed("writer"), 300, true);
  Reader reader(server, fresh_seed("reader"), 2000);
  ASSERT_TRUE(loop().run_for([&] { return reader.eof || reader.error || writer.error; }, 60s));
  ASSERT_FALSE(writer.error) << writer.error.message();
  ASSERT_FALSE(reader.error) << reader.error.message();
  EXPECT_TRUE(reader.got == data);
  // ~3500 writes of 150 bytes on average; sharing blocks makes far fewer SENDs.
  EXPECT_LT(rdma_stream_info(client)->data_messages_sent, 3000u);
}

// A knob for hand runs (bench): RMSG_IDLE_PAIRS / RMSG_IDLE_SECONDS scale the idle cases.
int env_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

// `pairs` connected pairs that each carried a message, then left alone.
void open_idle_pairs(RdmaDatapath& t, const RdmaOptions& o, int pairs, std::vector<Stream>& out) {
  for (int i = 0; i < pairs; ++i) {
    Stream c, s;
    ASSERT_NO_FATAL_FAILURE(t.connect(o, c, s));
    std::array<std::byte, 64> one{};
    ASSERT_TRUE(c.write(one).ok());  // some traffic first: the CQs were polled and armed
    out.push_back(std::move(c));
    out.push_back(std::move(s));
  }
}

// Idle streams (keepalive off) cost their loop nothing: no wakeup in a second.
TEST_F(RdmaDatapath, IdleStreamsDoNotWakeTheLoop) {
  ASSERT_NO_FATAL_FAILURE(use_mode(Mode::adaptive));
  const int pairs = env_or("RMSG_IDLE_PAIRS", 8);
  const auto idle = std::chrono::seconds(env_or("RMSG_IDLE_SECONDS", 1));
  std::vector<Stream> streams;
  ASSERT_NO_FATAL_FAILURE(open_idle_pairs(*this, datapath_options(), pairs, streams));
  loop().run_for([] { return false; }, 200ms);  // the writes and setup settle
  const auto wakeups = loop_counter("loop.wakeups");
  const auto iterations = loop_counter("loop.iterations");
  loop().run_for([] { return false; }, idle);
  const auto woke = loop_counter("loop.wakeups") - wakeups;
  std::printf("idle: %d streams, %lld s: %llu wakeups, %llu iterations\n", 2 * pairs,
              static_cast<long long>(idle.count()), static_cast<unsigned long long>(woke),
              static_cast<unsigned long long>(loop_counter("loop.iterations") - iterations));
  EXPECT_LE(woke, 1u) << "the run_for deadline only";
  EXPECT_LE(loop_counter("loop.iterations") - iterations, 2u);
}

// With keepalives, an idle loop wakes for the keepalive timers and for the keepalives
// its streams receive, and for nothing else.
TEST_F(RdmaDatapath, IdleStreamsWithKeepalivesWakeOnlyForThem) {
  ASSERT_NO_FATAL_FAILURE(use_mode(Mode::adaptive));
  const int pairs = env_or("RMSG_IDLE_PAIRS", 4);
  const auto idle = std::chrono::seconds(env_or("RMSG_IDLE_SECONDS", 1));
  RdmaOptions o = datapath_options();
  o.keepalive_interval = 250ms;
  o.idle_timeout = 0ms;
  std::vector<Stream> streams;
  ASSERT_NO_FATAL_FAILURE(open_idle_pairs(*this, o, pairs, streams));
  loop().run_for([] { return false; }, 200ms);
  auto keepalives = [&] {
    std::uint64_t n = 0;
    for (const Stream& s : streams) n += rdma_stream_counters(s)->value("keepalives_received");
    return n;
  };
  const auto wakeups = loop_counter("loop.wakeups");
  const auto timers = loop_counter("loop.timers_fired");
  const auto received = keepalives();
  loop().run_for([] { return false; }, idle);
  const auto woke = loop_counter("loop.wakeups") - wakeups;
  const auto fired = loop_counter("loop.timers_fired") - timers;
  const auto got = keepalives() - received;
  std::printf(
      "keepalive 250 ms: %d streams, %lld s: %llu wakeups, %llu timers, %llu "
      "keepalives received\n",
      2 * pairs, static_cast<long long>(idle.count()), static_cast<unsigned long long>(woke),
      static_cast<unsigned long long>(fired), static_cast<unsigned long long>(got));
  EXPECT_GT(got, 0u);
  EXPECT_LE(woke, fired + got + 1);
}

}  // namespace
}  // namespace rmsg::testing
