// Many streams on one loop thread: 64 connections, every byte echoed and checked, and
// after closing everything the process holds no verbs objects beyond its listener's.
#include <gtest/gtest.h>

#include <filesystem>

#include "kit/process_util.h"
#include "kit/rdma_fixture.h"
#include "kit/verbs_census.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kStreams = 64;

// Echoes everything it reads; shuts its side down after the peer's EOF.
struct Echo {
  explicit Echo(Stream s) : stream(std::move(s)) {
    stream.on_readable([this] { pump(); });
  }
  Echo(const Echo&) = delete;
  Echo& operator=(const Echo&) = delete;
  ~Echo() {
    stream.on_readable({});
    stream.on_writable({});
  }
  void pump() {
    std::array<std::byte, 32768> buf{};
    while (pending.size() < (1u << 20) && !eof) {
      auto r = stream.read(buf);
      if (!r) {
        if (!r.is(Errc::would_block)) error = r.error();
        break;
      }
      if (r.value() == 0) {
        eof = true;
        break;
      }
      pending.insert(pending.end(), buf.begin(), buf.begin() + static_cast<long>(r.value()));
    }
    while (!pending.empty()) {
      auto w = stream.write(pending);
      if (!w) {
        if (!w.is(Errc::would_block)) error = w.error();
        break;
      }
      pending.erase(pending.begin(), pending.begin() + static_cast<long>(w.value()));
    }
    stream.on_writable(pending.empty() ? Task{} : Task([this] { pump(); }));
    if (eof && pending.empty() && !shut) {
      shut = true;
      stream.on_readable({});
      if (auto r = stream.shutdown_write(); !r) error = r.error();
    }
  }
  Stream stream;
  std::vector<std::byte> pending;
  bool eof = false;
  bool shut = false;
  std::error_code error;
};

int open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

class RdmaScale : public RdmaTest {};

TEST_F(RdmaScale, SixtyFourStreamsOnOneLoopAreByteExactAndLeaveNothingBehind) {
  std::vector<std::unique_ptr<Echo>> echoes;
  RdmaOptions server = test_options();
  server.max_inbound_handshakes = kStreams;  // every connect at once, above the default cap
  auto l = rdma_listen(loop(), address(), server,
                       [&](Stream s) { echoes.push_back(std::make_unique<Echo>(std::move(s))); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  const char* kinds[] = {"qp", "cq", "mr", "cm_id"};
  std::map<std::string, int> base;
  for (const char* k : kinds) {
    std::string why;
    base[k] = verbs_objects(k, &why);
    ASSERT_GE(base[k], 0) << why;
  }
  const int base_fds = open_fds();
  SocketAddress peer = address();
  peer.set_port(l->port());
  std::vector<Stream> clients(kStreams);
  int connected = 0;
  std::error_code connect_error;
  for (int i = 0; i < kStreams; ++i) {
    rdma_connect(loop(), peer, test_options(), [&, i](Result<Stream> r) {
      ++connected;
      if (r) {
        clients[i] = std::move(r).value();
      } else {
        connect_error = r.error();
      }
    });
  }
  ASSERT_TRUE(
      loop().run_for([&] { return connected == kStreams && echoes.size() == kStreams; }, 120s))
      << connected << " connected, " << echoes.size() << " accepted";
  ASSERT_FALSE(connect_error) << connect_error.message();
  EXPECT_EQ(verbs_objects("qp"), base["qp"] + 2 * kStreams);
  // Completion events come through one channel per loop and device, and the ids share
  // the loop's rdma_cm channel: the descriptors do not grow with the streams.
  EXPECT_LE(open_fds() - base_fds, 1) << "descriptors for " << 2 * kStreams << " stream ends";

  const auto seed = fresh_seed("64 streams");
  std::vector<std::vector<std::byte>> data;
  std::vector<std::unique_ptr<Writer>> writers;
  std::vector<std::unique_ptr<Reader>> readers;
  for (int i = 0; i < kStreams; ++i) {
    data.push_back(random_bytes(64 * 1024 + (seed + i) % 65536, seed + i));
    writers.push_back(std::make_unique<Writer>(clients[i], data[i], seed + i, 20000, true));
    readers.push_back(std::make_unique<Reader>(clients[i], seed + 100 + i, 30000));
  }
  auto all_done = [&] {
    for (int i = 0; i < kStreams; ++i) {
      if (writers[i]->error || readers[i]->error) return true;
      if (!readers[i]->eof) return false;
    }
    return true;
  };
  ASSERT_TRUE(loop().run_for(all_done, 300s)) << "echo stalled";
  std::uint64_t sent = 0;
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_FALSE(writers[i]->error) << i << ": " << writers[i]->error.message();
    ASSERT_FALSE(readers[i]->error) << i << ": " << readers[i]->error.message();
    ASSERT_TRUE(readers[i]->got == data[i]) << "stream " << i << " differs (seed " << seed << ")";
    const CounterSet* c = rdma_stream_counters(clients[i]);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->value("bytes_sent"), data[i].size());
    EXPECT_EQ(c->value("bytes_received"), data[i].size());
    sent += data[i].size();
  }
  for (const auto& e : echoes) EXPECT_FALSE(e->error) << e->error.message();
  const char* dev = std::getenv("RMSG_RDMA_DEVICE");
  EXPECT_GE(rdma_device_counter(dev != nullptr ? dev : "rxe0", "bytes_sent"), 2 * sent);

  writers.clear();
  readers.clear();
  clients.clear();
  echoes.clear();
  const TimerId tick = loop().add_periodic(20ms, [] {});  // re-evaluates the predicate
  for (const char* k : kinds) {
    EXPECT_TRUE(loop().run_for([&] { return verbs_objects(k) == base[k]; }, 20s))
        << k << ": " << verbs_objects(k) << " held after closing everything, baseline " << base[k];
  }
  loop().cancel_timer(tick);
}

}  // namespace
}  // namespace rmsg::testing
