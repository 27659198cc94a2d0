// Stream::writev over RDMA: the parts are copied straight into send blocks and posted as
// the chain one write() of their concatenation would post (the same messages, the same
// ibv_post_send calls); a writev larger than the ring is accepted as a prefix.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kit/pattern.h"
#include "kit/rdma_fixture.h"
#include "kit/seed.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;
using Parts = std::vector<std::span<const std::byte>>;

// `data` cut into parts of 0..max_part bytes, log-uniform so that most are small and odd
// and a few straddle several blocks; empty ones are included (writev skips them).
Parts cut(std::span<const std::byte> data, std::mt19937_64& rng, std::size_t max_part) {
  Parts parts;
  while (!data.empty()) {
    const std::size_t n = std::min(log_uniform(rng, 1, max_part + 1) - 1, data.size());
    parts.push_back(data.first(n));
    data = data.subspan(n);
  }
  return parts;
}

std::vector<std::byte> pattern_bytes(const Pattern& pattern, std::size_t n) {
  std::vector<std::byte> v;
  while (v.size() < n) {
    const auto piece = pattern.at(v.size(), n - v.size());
    v.insert(v.end(), piece.begin(), piece.end());
  }
  return v;
}

RdmaOptions ring(std::uint32_t block, std::uint32_t send_blocks, std::uint32_t recv_blocks) {
  RdmaOptions o = test_options();
  o.send_block_size = block;
  o.recv_block_size = block;
  o.send_block_count = send_blocks;
  o.recv_block_count = recv_blocks;
  o.keepalive_interval = 0ms;  // no KEEPALIVE takes a credit while messages are counted
  o.idle_timeout = 0ms;
  return o;
}

class RdmaWritev : public RdmaTest {
 protected:
  RdmaStreamInfo info(const Stream& s) { return rdma_stream_info(s).value(); }

  // Reads until `n` bytes arrived and the client holds `credits` again (or the deadline).
  std::vector<std::byte> drain(Stream& client, Stream& server, std::size_t n,
                               std::uint32_t credits = 0) {
    Reader reader(server, 1, 3000);
    EXPECT_TRUE(loop().run_for(
        [&] { return reader.got.size() >= n && info(client).credits >= credits; }, 20s))
        << "got " << reader.got.size() << " of " << n << ", credits " << info(client).credits;
    EXPECT_FALSE(reader.error) << reader.error.message();
    return reader.got;
  }
};

// Per ring size: a writev that the ring takes whole is the chain of one write() of its
// concatenation: one post per 16 WRs (one for the default 8 blocks), one SEND per block.
TEST_F(RdmaWritev, WholeRingWritevPostsAsOneWriteOfTheConcatenation) {
  const auto seed = seed_for("rdma writev chain");
  std::mt19937_64 rng(seed);
  const Pattern pattern(seed);
  for (const std::uint32_t blocks : {8u, 24u}) {
    SCOPED_TRACE(blocks);
    // Receive blocks enough for the second round without the peer returning any credit
    // (it returns them only in batches of half its receive blocks).
    const RdmaOptions opts = ring(4096, blocks, 2 * blocks + 2);
    Stream client, server;
    ASSERT_NO_FATAL_FAILURE(connect_pair(opts, opts, client, server));
    const std::size_t bytes = std::size_t{blocks} * 4096 - 1001;  // the last block partly full
    const auto data = pattern_bytes(pattern, bytes);
    const Parts parts = cut(data, rng, 700);
    const auto before = info(client);
    auto n = client.writev(parts);
    const auto after = info(client);
    ASSERT_TRUE(n.ok()) << n.error().message();
    EXPECT_EQ(n.value(), bytes);
    const std::uint64_t posts = after.send_posts - before.send_posts;
    const std::uint64_t messages = after.data_messages_sent - before.data_messages_sent;
    EXPECT_EQ(messages, blocks);
    EXPECT_EQ(posts, (blocks + 15) / 16);
    std::printf("%u blocks: %zu parts -> %llu messages, %llu posts\n", blocks, parts.size(),
                static_cast<unsigned long long>(messages), static_cast<unsigned long long>(posts));
    // Credits for the same number of messages again (data needs 2 to send the last one).
    auto got = drain(client, server, bytes, blocks + 1);
    EXPECT_TRUE(got == data) << "writev: bytes differ";

    // The same bytes as one write(): the same messages and posts.
    const auto before_write = info(client);
    auto w = client.write(data);
    const auto after_write = info(client);
    ASSERT_TRUE(w.ok()) << w.error().message();
    EXPECT_EQ(w.value(), bytes);
    EXPECT_EQ(after_write.send_posts - before_write.send_posts, posts);
    EXPECT_EQ(after_write.data_messages_sent - before_write.data_messages_sent, messages);
    got = drain(client, server, bytes);
    EXPECT_TRUE(got == data) << "write: bytes differ";
  }
}

// Many odd parts, blocks of two sizes (4096, and 1000 where the peer's receive blocks set
// the message size), writevs larger than the ring: each returns a prefix, always whole
// messages, and the receiver gets every byte in order.
TEST_F(RdmaWritev, ManyOddPartsArriveByteExactThroughPartialAcceptance) {
  const auto seed = seed_for("rdma writev transfer");
  std::mt19937_64 rng(seed);
  const Pattern pattern(seed);
  for (const std::uint32_t recv_block : {4096u, 1000u}) {
    SCOPED_TRACE(recv_block);
    const RdmaOptions client_opts = ring(4096, 8, 8);
    RdmaOptions server_opts = ring(4096, 8, 8);
    server_opts.recv_block_size = recv_block;
    Stream client, server;
    ASSERT_NO_FATAL_FAILURE(connect_pair(client_opts, server_opts, client, server));
    const std::uint32_t max_message = info(client).max_message;
    ASSERT_EQ(max_message, recv_block);
    const std::size_t kBytes = 2 << 20;
    const auto data = pattern_bytes(pattern, kBytes);
    std::size_t sent = 0, calls = 0, partial = 0, not_whole = 0;
    std::error_code write_error;
    client.on_writable([&] {
      while (sent < kBytes) {
        // Up to twice the ring, cut anew every call.
        const auto window = std::span(data).subspan(sent).first(
            std::min<std::size_t>(kBytes - sent, 16 * std::size_t{max_message}));
        const Parts parts = cut(window, rng, 9000);
        auto n = client.writev(parts);
        ++calls;
        if (!n) {
          if (!n.is(Errc::would_block)) write_error = n.error();
          return;
        }
        ASSERT_GE(n.value(), 1u);
        ASSERT_LE(n.value(), window.size());
        if (n.value() < window.size()) {
          ++partial;
          if (n.value() % max_message != 0) ++not_whole;
        }
        sent += n.value();
      }
      client.on_writable({});
      if (auto r = client.shutdown_write(); !r) write_error = r.error();
    });
    Reader reader(server, static_cast<std::uint32_t>(seed), 5000);
    ASSERT_TRUE(loop().run_for([&] { return reader.eof || reader.error || write_error; }, 60s))
        << "sent " << sent << ", received " << reader.got.size();
    ASSERT_FALSE(write_error) << write_error.message();
    ASSERT_FALSE(reader.error) << reader.error.message();
    ASSERT_EQ(reader.got.size(), kBytes);
    EXPECT_TRUE(reader.got == data) << "bytes differ";
    EXPECT_GT(partial, 0u) << "no writev was accepted in part";
    EXPECT_EQ(not_whole, 0u) << "a partial writev ended inside a message";
    std::printf("recv block %u: %zu writev calls, %zu partly accepted\n", recv_block, calls,
                partial);
  }
}

TEST_F(RdmaWritev, EmptyPartsAndStates) {
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(test_options(), test_options(), client, server));
  const auto before = info(client);
  EXPECT_EQ(client.writev({}).value(), 0u);
  const Parts empties(3);
  EXPECT_EQ(client.writev(empties).value(), 0u);
  EXPECT_EQ(info(client).send_posts, before.send_posts);  // nothing posted for nothing
  const char a[] = "ab", b[] = "cde";
  const Parts parts{{}, std::as_bytes(std::span(a, 2)), {}, std::as_bytes(std::span(b, 3))};
  auto n = client.writev(parts);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(n.value(), 5u);
  EXPECT_EQ(info(client).data_messages_sent - before.data_messages_sent, 1u);  // one block
  const auto got = drain(client, server, 5);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.data()), got.size()), "abcde");
  ASSERT_TRUE(client.shutdown_write().ok());
  EXPECT_TRUE(client.writev(parts).is(Errc::shutdown));
  client.close();
  EXPECT_TRUE(client.writev(parts).is(Errc::closed));
}

}  // namespace
}  // namespace rmsg::testing
