// The shared-receive mode (docs/protocol.md, Shared receive) over real verbs: every byte
// arrives through the loop's pool, many streams on a pool smaller than the sum of their
// windows see no RNR (rxe's counters) and lose nothing, a connection beyond the budget is
// refused with resource_exhausted, and a pair where one side does not offer the mode falls
// back to per-stream rings.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "kit/rdma_fixture.h"
#include "rdma/seams.h"
#include "rdma/wire.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

RdmaOptions shared_options() {
  RdmaOptions o = test_options();
  o.shared_receive = true;
  o.send_block_size = 4096;  // a pool block
  o.send_block_count = 8;
  return o;
}

class RdmaSharedReceive : public RdmaTest {
 protected:
  // Listens with `server` and connects `n` clients with `client` on this loop.
  void connect_many(const RdmaOptions& client, const RdmaOptions& server, std::size_t n,
                    std::vector<Stream>& clients, std::vector<Stream>& servers) {
    auto l = rdma_listen(loop(), address(), server,
                         [this](Stream s) { accepted_.push_back(std::move(s)); });
    ASSERT_TRUE(l.ok()) << l.error().message();
    listener_ = std::move(l).value();
    SocketAddress peer = address();
    peer.set_port(listener_.port());
    std::size_t done = 0;
    std::error_code err;
    for (std::size_t i = 0; i < n; ++i) {
      rdma_connect(loop(), peer, client, [&](Result<Stream> r) {
        ++done;
        if (r) {
          clients.push_back(std::move(r).value());
        } else {
          err = r.error();
        }
      });
    }
    ASSERT_TRUE(loop().run_for([&] { return done == n && accepted_.size() == n; }, 60s))
        << done << " connects done, " << accepted_.size() << " accepted: " << err.message();
    ASSERT_FALSE(err) << err.message();
    servers = std::move(accepted_);
    accepted_.clear();
  }
};

TEST_F(RdmaSharedReceive, EveryByteBothWaysThroughThePoolWithoutRnr) {
  const long long rnr0 = rnr_counter_sum();
  Stream client, server;
  ASSERT_NO_FATAL_FAILURE(connect_pair(shared_options(), shared_options(), client, server));
  EXPECT_EQ(rdma::stream_features(client), rdma::wire::kFeatureSharedReceive);
  EXPECT_EQ(rdma::stream_features(server), rdma::wire::kFeatureSharedReceive);
  ASSERT_TRUE(rdma_stream_info(client)->shared_receive);
  ASSERT_TRUE(rdma_stream_info(server)->shared_receive);
  EXPECT_EQ(rdma_stream_info(client)->peer_recv_blocks, 4u);  // G
  const auto seed = fresh_seed("shared both ways");
  const auto a = random_bytes(3u << 20, seed), b = random_bytes((2u << 20) + 17, seed + 9);
  Writer wa(client, a, seed + 1, 70000, true), wb(server, b, seed + 2, 5000, true);
  Reader ra(server, seed + 3, 9000), rb(client, seed + 4, 100000);
  std::uint32_t max_window = 0;
  ASSERT_TRUE(loop().run_for(
      [&] {
        max_window = std::max(max_window, rdma_stream_info(server)->recv_window);
        return (ra.eof && rb.eof) || wa.error || wb.error || ra.error || rb.error;
      },
      120s));
  ASSERT_FALSE(wa.error || wb.error || ra.error || rb.error);
  EXPECT_TRUE(ra.got == a);
  EXPECT_TRUE(rb.got == b);
  EXPECT_GT(max_window, 4u) << "a busy connection never got a lease";
  const long long rnr1 = rnr_counter_sum();
  ASSERT_GE(rnr0, 0) << "rxe's RNR counters are not readable";
  EXPECT_EQ(rnr1 - rnr0, 0) << "RNR events during the run";
  std::printf("largest window %u blocks; %llu data messages sent by the client\n", max_window,
              static_cast<unsigned long long>(rdma_stream_info(client)->data_messages_sent));
}

// 8 pairs on one loop: 16 streams on one pool of 16 x 4 guaranteed + 16 lease blocks (80
// blocks, 320 KiB), while their windows may grow to 16 x 32 = 512 blocks: the leases are
// shared, never overrun.
TEST_F(RdmaSharedReceive, ManyStreamsOnAPoolSmallerThanTheirWindowsLoseNothing) {
  constexpr std::size_t kPairs = 8;
  RdmaOptions o = shared_options();
  o.shared_connections = 2 * kPairs;
  o.shared_lease_blocks = 16;
  const long long rnr0 = rnr_counter_sum();
  std::vector<Stream> clients, servers;
  ASSERT_NO_FATAL_FAILURE(connect_many(o, o, kPairs, clients, servers));
  for (std::size_t i = 0; i < kPairs; ++i) {
    ASSERT_TRUE(rdma_stream_info(clients[i])->shared_receive);
    ASSERT_TRUE(rdma_stream_info(servers[i])->shared_receive);
  }
  const auto seed = fresh_seed("many on one pool");
  std::vector<std::vector<std::byte>> data;
  std::vector<std::unique_ptr<Writer>> writers;
  std::vector<std::unique_ptr<Reader>> readers;
  for (std::size_t i = 0; i < kPairs; ++i) {
    data.push_back(random_bytes((512u << 10) + i, seed + static_cast<std::uint32_t>(i)));
  }
  for (std::size_t i = 0; i < kPairs; ++i) {
    writers.push_back(std::make_unique<Writer>(clients[i], data[i], seed + 100 + i, 20000, true));
    // A slow reader on half of them: their blocks wait unread while the others stream.
    readers.push_back(std::make_unique<Reader>(servers[i], seed + 200 + i, i % 2 ? 300 : 65536));
  }
  auto all_done = [&] {
    for (std::size_t i = 0; i < kPairs; ++i) {
      if (writers[i]->error || readers[i]->error) return true;
      if (!readers[i]->eof) return false;
    }
    return true;
  };
  ASSERT_TRUE(loop().run_for(all_done, 120s));
  for (std::size_t i = 0; i < kPairs; ++i) {
    ASSERT_FALSE(writers[i]->error) << writers[i]->error.message();
    ASSERT_FALSE(readers[i]->error) << readers[i]->error.message();
    EXPECT_TRUE(readers[i]->got == data[i]) << "pair " << i;
  }
  const long long rnr1 = rnr_counter_sum();
  ASSERT_GE(rnr0, 0);
  EXPECT_EQ(rnr1 - rnr0, 0) << "RNR events during the run";
}

// The acceptor's pool admits one connection; the second request is refused before
// anything is built, and the connector (on another loop, another pool) hears
// resource_exhausted.
TEST_F(RdmaSharedReceive, AConnectionBeyondTheBudgetIsRefused) {
  RdmaOptions server = shared_options();
  server.shared_connections = 1;
  auto l = rdma_listen(loop(), address(), server,
                       [this](Stream s) { accepted_.push_back(std::move(s)); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  listener_ = std::move(l).value();
  SocketAddress peer = address();
  peer.set_port(listener_.port());
  std::atomic<int> finished{0};
  std::error_code results[2];
  std::thread client([&] {
    auto made = EventLoop::create();
    if (!made) return;
    EventLoop& cl = *made.value();
    std::vector<Stream> kept;
    int done = 0;
    for (int i = 0; i < 2; ++i) {
      rdma_connect(cl, peer, shared_options(), [&, i](Result<Stream> r) {
        ++done;
        if (r) {
          kept.push_back(std::move(r).value());
        } else {
          results[i] = r.error();
        }
      });
      cl.run_for([&] { return done == i + 1; }, 20s);
    }
    finished = done;
    loop().post([] {});
  });
  loop().run_for([&] { return finished.load() != 0; }, 60s);
  client.join();
  ASSERT_EQ(finished.load(), 2);
  EXPECT_FALSE(results[0]) << results[0].message();
  EXPECT_EQ(results[1], make_error_code(Errc::resource_exhausted)) << results[1].message();
  EXPECT_EQ(accepted_.size(), 1u);
}

// One side offers the mode, the other does not (an older peer's hello is exactly this):
// the acceptor without it answers from rings, the connector receives from its pool with a
// fixed window; an acceptor with it answers a plain request from rings.
TEST_F(RdmaSharedReceive, AMixedPairFallsBackAndCarriesEveryByte) {
  for (const bool client_shared : {true, false}) {
    SCOPED_TRACE(client_shared ? "client offers the mode" : "server offers the mode");
    Stream client, server;
    ASSERT_NO_FATAL_FAILURE(connect_pair(client_shared ? shared_options() : test_options(),
                                         client_shared ? test_options() : shared_options(), client,
                                         server));
    EXPECT_EQ(rdma::stream_features(client), 0u);
    EXPECT_EQ(rdma::stream_features(server), 0u);
    EXPECT_EQ(rdma_stream_info(client)->shared_receive, client_shared);
    EXPECT_FALSE(rdma_stream_info(server)->shared_receive);
    const auto seed = fresh_seed("mixed");
    const auto a = random_bytes(1u << 20, seed), b = random_bytes((1u << 20) + 3, seed + 9);
    Writer wa(client, a, seed + 1, 70000, true), wb(server, b, seed + 2, 5000, true);
    Reader ra(server, seed + 3, 9000), rb(client, seed + 4, 100000);
    ASSERT_TRUE(loop().run_for(
        [&] { return (ra.eof && rb.eof) || wa.error || wb.error || ra.error || rb.error; }, 120s));
    ASSERT_FALSE(wa.error || wb.error || ra.error || rb.error);
    EXPECT_TRUE(ra.got == a);
    EXPECT_TRUE(rb.got == b);
    if (client_shared) {
      EXPECT_EQ(rdma_stream_info(client)->recv_window, 4u) << "no lease";
    }
  }
}

}  // namespace
}  // namespace rmsg::testing
