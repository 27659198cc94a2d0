// Byte-exact transfers of random sizes with random write and read chunking, ending in an
// orderly shutdown, client and server on one loop thread.
#include <random>
#include <vector>

#include "kit/pattern.h"
#include "kit/seed.h"
#include "kit/tcp_fixture.h"

namespace rmsg {
namespace {

using testing::log_uniform;
using testing::Pattern;
using namespace std::chrono_literals;
using testing::TcpTest;

constexpr std::size_t kMaxSize = 64u << 20;
constexpr std::size_t kMaxChunk = 1u << 20;

struct TransferResult {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  bool eof = false;
  bool corrupt = false;
  std::error_code error;
};

// Sends `total` pattern bytes from w to r (random write sizes, then shutdown_write) while r
// reads with random buffer sizes and checks every byte; returns when r sees EOF.
TransferResult transfer(EventLoop& loop, Stream& w, Stream& r, std::uint64_t total,
                        const Pattern& pattern, std::uint64_t seed) {
  TransferResult res;
  std::mt19937_64 wrng(seed);
  std::mt19937_64 rrng(seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<std::byte> buf(kMaxChunk);
  auto on_error = [&](std::error_code ec) {
    if (!res.error) res.error = ec;
  };
  w.on_writable([&] {
    while (res.sent < total) {
      const auto want = std::min<std::uint64_t>(log_uniform(wrng, 1, kMaxChunk), total - res.sent);
      auto n = w.write(pattern.at(res.sent, want));
      if (!n) {
        if (!n.is(Errc::would_block)) on_error(n.error());
        return;
      }
      res.sent += *n;
    }
    if (auto s = w.shutdown_write(); !s) on_error(s.error());
    w.on_writable({});
  });
  r.on_readable([&] {
    const auto want = log_uniform(rrng, 1, kMaxChunk);
    auto n = r.read(std::span(buf).first(want));
    if (!n) {
      if (!n.is(Errc::would_block)) on_error(n.error());
      return;
    }
    if (*n == 0) {
      res.eof = true;
      r.on_readable({});
      return;
    }
    if (!pattern.matches(res.received, std::span(buf).first(*n))) res.corrupt = true;
    res.received += *n;
  });
  loop.run_for([&] { return res.eof || res.error || res.corrupt; }, 60s);
  w.on_writable({});
  r.on_readable({});
  return res;
}

TEST_F(TcpTest, RandomSizesAreByteExactWithRandomChunking) {
  const auto seed = testing::seed_for("tcp transfer");
  std::mt19937_64 rng(seed);
  const Pattern pattern(rng());
  std::vector<std::uint64_t> sizes = {1, kMaxSize};
  for (int i = 0; i < 12; ++i) sizes.push_back(log_uniform(rng, 1, kMaxSize));
  for (const auto size : sizes) {
    const auto case_seed = rng();
    SCOPED_TRACE("size " + std::to_string(size) + " case seed " + std::to_string(case_seed));
    auto [client, server] = connect_pair();
    ASSERT_TRUE(client.valid() && server.valid());
    // Alternate the direction so that both the connecting and the accepting side write.
    const bool forward = (size & 1) == 0;
    auto res = forward ? transfer(loop(), client, server, size, pattern, case_seed)
                       : transfer(loop(), server, client, size, pattern, case_seed);
    EXPECT_FALSE(res.error) << res.error.message();
    EXPECT_FALSE(res.corrupt) << "data mismatch near byte " << res.received;
    EXPECT_TRUE(res.eof) << "no EOF after " << res.received << " of " << size;
    EXPECT_EQ(res.sent, size);
    EXPECT_EQ(res.received, size);
    std::cout << "[ info     ] " << size << " bytes "
              << (forward ? "client->server" : "server->client") << std::endl;
  }
}

TEST_F(TcpTest, SmallBuffersStillTransferExactly) {
  // Tiny socket buffers force many partial writes and would_block turns.
  TcpOptions opt;
  opt.send_buffer = 16384;
  opt.recv_buffer = 16384;
  const auto seed = testing::seed_for("tcp small buffers");
  const Pattern pattern(seed);
  auto [client, server] = connect_pair(opt);
  ASSERT_TRUE(client.valid() && server.valid());
  auto res = transfer(loop(), client, server, 3u << 20, pattern, seed);
  EXPECT_FALSE(res.error) << res.error.message();
  EXPECT_FALSE(res.corrupt);
  EXPECT_TRUE(res.eof);
  EXPECT_EQ(res.received, 3u << 20);
}

}  // namespace
}  // namespace rmsg
