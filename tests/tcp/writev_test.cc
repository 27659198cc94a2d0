// Stream::writev over TCP: one sendmsg for every part (IOV_MAX at most), byte-exact under
// backpressure with partial acceptance, and the same errors as write().
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <tuple>
#include <vector>

#include "kit/pattern.h"
#include "kit/seed.h"
#include "kit/tcp_fixture.h"

namespace rmsg::testing {
namespace {

using Parts = std::vector<std::span<const std::byte>>;

// `data` cut into random parts of 0..max_part bytes (empty ones included: they are skipped).
Parts cut(std::span<const std::byte> data, std::mt19937_64& rng, std::size_t max_part) {
  Parts parts;
  std::uniform_int_distribution<std::size_t> len(0, max_part);
  while (!data.empty()) {
    const std::size_t n = std::min(len(rng), data.size());
    parts.push_back(data.first(n));
    data = data.subspan(n);
  }
  return parts;
}

// The parts that remain after the first `skip` bytes of their concatenation.
Parts after(const Parts& parts, std::size_t skip) {
  Parts rest;
  for (const auto p : parts) {
    if (skip >= p.size()) {
      skip -= p.size();
      continue;
    }
    rest.push_back(p.subspan(skip));
    skip = 0;
  }
  return rest;
}

std::size_t total(const Parts& parts) {
  std::size_t n = 0;
  for (const auto p : parts) n += p.size();
  return n;
}

TEST_F(TcpTest, WritevOfManyOddPartsIsByteExactUnderBackpressure) {
  const auto seed = seed_for("tcp writev");
  std::mt19937_64 rng(seed);
  TcpOptions opts;
  opts.send_buffer = 16 * 1024;  // small: writes are often partly accepted
  opts.recv_buffer = 16 * 1024;
  Stream client, server;  // named: lambdas capture them (clang 14 lacks P1381)
  std::tie(client, server) = connect_pair(opts);
  ASSERT_TRUE(client.valid() && server.valid());
  const Pattern pattern(seed);
  const std::size_t kBytes = 4 << 20;
  std::vector<std::byte> data(kBytes);
  for (std::size_t off = 0; off < kBytes;) {
    const auto piece = pattern.at(off, kBytes - off);
    std::copy(piece.begin(), piece.end(), data.begin() + static_cast<long>(off));
    off += piece.size();
  }

  std::size_t sent = 0, calls = 0, partial = 0;
  std::error_code write_error;
  client.on_writable([&] {
    while (sent < kBytes) {
      // A few hundred parts of up to 700 bytes each, re-cut at every call.
      auto window = std::span<const std::byte>(data).subspan(sent).first(
          std::min<std::size_t>(kBytes - sent, 64 * 1024));
      const Parts parts = cut(window, rng, 700);
      auto n = client.writev(parts);
      ++calls;
      if (!n) {
        if (!n.is(Errc::would_block)) write_error = n.error();
        return;
      }
      ASSERT_GE(n.value(), 1u);
      ASSERT_LE(n.value(), window.size());
      if (n.value() < window.size()) ++partial;
      sent += n.value();
    }
    client.on_writable({});
    if (auto r = client.shutdown_write(); !r) write_error = r.error();
  });
  std::vector<std::byte> got;
  bool eof = false;
  server.on_readable([&] {
    std::byte buf[5003];
    for (;;) {
      auto n = server.read(buf, sizeof buf);
      if (!n) return;
      if (n.value() == 0) {
        eof = true;
        server.on_readable({});
        return;
      }
      got.insert(got.end(), buf, buf + n.value());
    }
  });
  ASSERT_TRUE(loop().run_for([&] { return eof || write_error; }, 30s));
  ASSERT_FALSE(write_error) << write_error.message();
  EXPECT_EQ(sent, kBytes);
  ASSERT_EQ(got.size(), kBytes);
  EXPECT_TRUE(pattern.matches(0, got));
  EXPECT_GT(partial, 0u) << "the socket buffer never refused part of a writev";
  std::printf("writev calls %zu, partly accepted %zu\n", calls, partial);
}

TEST_F(TcpTest, WritevOffersAtMostIovMaxParts) {
  Stream client, server;  // named: lambdas capture them (clang 14 lacks P1381)
  std::tie(client, server) = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  const std::size_t kParts = IOV_MAX + 100;
  std::vector<std::byte> data(kParts);
  for (std::size_t i = 0; i < kParts; ++i) data[i] = static_cast<std::byte>(i * 7);
  Parts parts;
  for (std::size_t i = 0; i < kParts; ++i) parts.push_back(std::span(data).subspan(i, 1));
  // An empty socket buffer takes 1124 bytes: only the first IOV_MAX parts were offered.
  auto n = client.writev(parts);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(n.value(), std::size_t{IOV_MAX});
  auto m = client.writev(after(parts, n.value()));
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m.value(), kParts - IOV_MAX);
  std::vector<std::byte> got;
  ASSERT_TRUE(loop().run_for(
      [&] {
        std::byte buf[4096];
        auto r = server.read(buf, sizeof buf);
        if (r && r.value() > 0) got.insert(got.end(), buf, buf + r.value());
        return got.size() >= kParts;
      },
      10s));
  EXPECT_EQ(got, data);
}

TEST_F(TcpTest, WritevSkipsEmptyPartsAndReturnsZeroForNone) {
  Stream client, server;  // named: lambdas capture them (clang 14 lacks P1381)
  std::tie(client, server) = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  EXPECT_EQ(client.writev({}).value(), 0u);
  const Parts empties(5);
  EXPECT_EQ(client.writev(empties).value(), 0u);
  const char a[] = "ab", b[] = "cde";
  const Parts parts{{}, std::as_bytes(std::span(a, 2)), {}, std::as_bytes(std::span(b, 3)), {}};
  EXPECT_EQ(total(parts), 5u);
  auto n = client.writev(parts);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_EQ(n.value(), 5u);
  std::string got;
  ASSERT_TRUE(loop().run_for(
      [&] {
        char buf[16];
        auto r = server.read(buf, sizeof buf);
        if (r && r.value() > 0) got.append(buf, r.value());
        return got.size() >= 5;
      },
      10s));
  EXPECT_EQ(got, "abcde");
}

TEST_F(TcpTest, WritevFailsAsWriteDoes) {
  Stream client, server;  // named: lambdas capture them (clang 14 lacks P1381)
  std::tie(client, server) = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  const char x[] = "xyz";
  const Parts parts{std::as_bytes(std::span(x, 3))};
  server.close();  // abortive: RST
  std::error_code ec;
  ASSERT_TRUE(loop().run_for(
      [&] {
        auto r = client.writev(parts);
        if (!r && !r.is(Errc::would_block)) ec = r.error();
        return bool(ec);
      },
      10s));
  EXPECT_TRUE(ec == Errc::connection_reset || ec == Errc::peer_closed) << ec.message();
  EXPECT_EQ(client.writev(parts).error(), client.write(x, 3).error());  // sticky, the same

  Stream c2, s2;  // named: lambdas capture them (clang 14 lacks P1381)
  std::tie(c2, s2) = connect_pair();
  ASSERT_TRUE(c2.valid() && s2.valid());
  ASSERT_TRUE(c2.shutdown_write().ok());
  EXPECT_TRUE(c2.writev(parts).is(Errc::shutdown));
  c2.close();
  EXPECT_TRUE(c2.writev(parts).is(Errc::closed));
  Stream empty;
  EXPECT_TRUE(empty.writev(parts).is(Errc::closed));
}

}  // namespace
}  // namespace rmsg::testing
