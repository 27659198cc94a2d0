// Fixture and helpers for RDMA stream tests. They run inside the Soft-RoCE guest
// (tests/softroce), which sets RMSG_RDMA_ADDR to the guest's eth0 IPv4 (rxe refuses
// 127.0.0.1). Without it, or without an active RDMA port, a test FAILS: it never skips.
#pragma once

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "rmsg/event_loop.h"
#include "rmsg/rdma.h"
#include "rmsg/stream.h"

namespace rmsg::testing {

// Options for tests: rnr_retry 0 on both sides, so any RNR is an error a test sees.
RdmaOptions test_options();
// Seeded random bytes.
std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed);
// A seed for `what` in the running test: seed_for(what) of kit/seed.h, so RMSG_TEST_SEED
// replays it (rmsg_test_main prints it at start).
std::uint32_t fresh_seed(const char* what);
// The rxe port counters of RNR events (sum), or -1 when the counters are not readable.
long long rnr_counter_sum();
// How long the RC transport retries an unACKed send: retry_count + 1 ACK timeouts.
std::chrono::nanoseconds retry_bound(const RdmaOptions& o);
// The context rdma_cm opened for the device RMSG_RDMA_DEVICE names (the one its ids, and
// so every stream, use); null when there is none. rdma_cm keeps it open for the process.
ibv_context* cm_device_context();

class RdmaTest : public ::testing::Test {
 protected:
  void SetUp() override;
  EventLoop& loop() { return *loop_; }
  const SocketAddress& address() const { return address_; }

  // Listens (port 0) with `server` options and connects with `client` options on this
  // one loop thread; fills client/server streams.
  void connect_pair(const RdmaOptions& client, const RdmaOptions& server, Stream& client_out,
                    Stream& server_out);

  std::unique_ptr<EventLoop> loop_;
  SocketAddress address_;
  Listener listener_;
  std::vector<Stream> accepted_;
};

// Writes `data` with random chunk sizes in [1, max_chunk] whenever the stream is
// writable; optionally shuts down its side at the end.
struct Writer {
  Writer(Stream& s, std::span<const std::byte> d, std::uint32_t seed, std::size_t max_chunk,
         bool shutdown_at_end);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() { stream.on_writable({}); }
  void step();
  Stream& stream;
  std::span<const std::byte> data;
  std::mt19937 rng;
  std::size_t max_chunk;
  bool shutdown_at_end;
  std::size_t offset = 0;
  std::size_t partial_writes = 0;  // accepted fewer bytes than asked
  std::size_t would_blocks = 0;
  bool done = false;
  std::error_code error;
};

// Reads with random buffer sizes in [1, max_chunk] whenever the stream is readable.
struct Reader {
  Reader(Stream& s, std::uint32_t seed, std::size_t max_chunk, bool armed = true);
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader() { stream.on_readable({}); }
  void arm();
  void step();
  void read_some(std::size_t limit);
  Stream& stream;
  std::mt19937 rng;
  std::size_t max_chunk;
  std::vector<std::byte> got;
  bool eof = false;
  std::error_code error;
};

}  // namespace rmsg::testing
