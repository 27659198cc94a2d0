// Backpressure: a writer whose reader stopped reading sees would_block and no writability;
// when reading resumes, writability returns and every byte arrives.
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

TEST_F(TcpTest, WriterSeesWouldBlockUntilReaderResumes) {
  // Named streams, not a structured binding: the lambdas below capture them, which clang 14
  // does not implement for bindings (C++20 P1381; clang has it from 16).
  Stream client;
  Stream server;
  std::tie(client, server) = connect_pair();
  ASSERT_TRUE(client.valid() && server.valid());
  const Pattern pattern(testing::seed_for("tcp backpressure"));

  // Fill: the reader is not reading, so the socket buffers must run out.
  constexpr std::uint64_t kSanityLimit = 1ull << 30;
  std::uint64_t sent = 0;
  bool blocked = false;
  while (sent < kSanityLimit) {
    auto n = client.write(pattern.at(sent, 65536));
    if (!n) {
      ASSERT_TRUE(n.is(Errc::would_block)) << n.error().message();
      blocked = true;
      break;
    }
    sent += *n;
  }
  ASSERT_TRUE(blocked) << "wrote " << sent << " bytes without would_block";
  const std::uint64_t queued = sent;
  const std::uint64_t total = queued + (8u << 20);

  int writable_calls = 0;
  bool writer_done = false;
  client.on_writable([&] {
    ++writable_calls;
    while (sent < total) {
      auto n = client.write(pattern.at(sent, total - sent));
      if (!n) {
        ASSERT_TRUE(n.is(Errc::would_block)) << n.error().message();
        return;
      }
      sent += *n;
    }
    ASSERT_TRUE(client.shutdown_write().ok());
    client.on_writable({});
    writer_done = true;
  });
  // While the reader is stopped, the writer must not be told it can write.
  loop().run_for([&] { return writable_calls > 0; }, 100ms);
  EXPECT_EQ(writable_calls, 0);

  // Resume reading: the writer completes and the reader gets every byte, then EOF.
  std::uint64_t received = 0;
  bool eof = false;
  bool corrupt = false;
  std::vector<std::byte> buf(256 << 10);
  server.on_readable([&] {
    auto n = server.read(buf);
    ASSERT_TRUE(n.ok()) << n.error().message();
    if (*n == 0) {
      eof = true;
      server.on_readable({});
      return;
    }
    corrupt |= !pattern.matches(received, std::span(buf).first(*n));
    received += *n;
  });
  ASSERT_TRUE(loop().run_for([&] { return eof || corrupt; }, 30s));
  EXPECT_FALSE(corrupt);
  EXPECT_TRUE(writer_done);
  EXPECT_GT(writable_calls, 0);
  EXPECT_EQ(received, total);
  std::cout << "[ info     ] queued before would_block: " << queued << " bytes" << std::endl;
}

}  // namespace
}  // namespace rmsg
