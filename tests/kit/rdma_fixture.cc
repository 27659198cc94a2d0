#include "kit/rdma_fixture.h"

#include <rdma/rdma_cma.h>

#include <cstdlib>
#include <fstream>

#include "kit/seed.h"

namespace rmsg::testing {

RdmaOptions test_options() {
  RdmaOptions o;
  o.rnr_retry_count = 0;
  o.retry_count = 7;
  return o;
}

std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

std::uint32_t fresh_seed(const char* what) {
  return static_cast<std::uint32_t>(seed_for(what));
}

std::chrono::nanoseconds retry_bound(const RdmaOptions& o) {
  return std::chrono::nanoseconds(4096ll << o.ack_timeout) * (o.retry_count + 1);
}

ibv_context* cm_device_context() {
  const char* want = std::getenv("RMSG_RDMA_DEVICE");
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  ibv_context* found = nullptr;
  for (int i = 0; list != nullptr && i < n; ++i) {
    if (want != nullptr && std::string(ibv_get_device_name(list[i]->device)) == want) {
      found = list[i];
    }
  }
  if (list != nullptr) rdma_free_devices(list);
  return found;
}

long long rnr_counter_sum() {
  const char* dev = std::getenv("RMSG_RDMA_DEVICE");
  const std::string base =
      std::string("/sys/class/infiniband/") + (dev ? dev : "rxe0") + "/ports/1/hw_counters/";
  long long sum = 0;
  for (const char* name : {"rcvd_rnr_err", "send_rnr_err", "retry_rnr_exceeded_err"}) {
    std::ifstream in(base + name);
    long long v = 0;
    if (!(in >> v)) return -1;
    sum += v;
  }
  return sum;
}

void RdmaTest::SetUp() {
  const char* addr = std::getenv("RMSG_RDMA_ADDR");
  ASSERT_NE(addr, nullptr) << "RMSG_RDMA_ADDR is not set: run RDMA tests in the Soft-RoCE "
                              "guest (tests/softroce/run), which sets it";
  auto a = SocketAddress::from_host_port(addr, 0);
  ASSERT_TRUE(a.ok()) << "RMSG_RDMA_ADDR=" << addr << ": " << a.error().message();
  address_ = a.value();
  ASSERT_TRUE(rdma_device_available()) << "no RDMA device with an active port";
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  loop_ = std::move(l).value();
}

void RdmaTest::connect_pair(const RdmaOptions& client, const RdmaOptions& server,
                            Stream& client_out, Stream& server_out) {
  auto l = rdma_listen(loop(), address_, server,
                       [this](Stream s) { accepted_.push_back(std::move(s)); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  listener_ = std::move(l).value();
  ASSERT_NE(listener_.port(), 0);
  SocketAddress peer = address_;
  peer.set_port(listener_.port());
  bool connected = false;
  std::error_code err;
  rdma_connect(loop(), peer, client, [&](Result<Stream> r) {
    connected = true;
    if (r) {
      client_out = std::move(r).value();
    } else {
      err = r.error();
    }
  });
  EXPECT_FALSE(connected) << "the callback ran inside rdma_connect";
  ASSERT_TRUE(
      loop().run_for([&] { return connected && !accepted_.empty(); }, std::chrono::seconds(20)))
      << "connect did not complete: " << err.message();
  ASSERT_FALSE(err) << err.message();
  ASSERT_TRUE(client_out.valid());
  server_out = std::move(accepted_.back());
  accepted_.pop_back();
  EXPECT_STREQ(client_out.transport(), "rdma");
}

Writer::Writer(Stream& s, std::span<const std::byte> d, std::uint32_t seed, std::size_t max,
               bool shutdown)
    : stream(s), data(d), rng(seed), max_chunk(max), shutdown_at_end(shutdown) {
  stream.on_writable([this] { step(); });
}

void Writer::step() {
  std::uniform_int_distribution<std::size_t> dist(1, max_chunk);
  while (offset < data.size()) {
    const std::size_t want = std::min(data.size() - offset, dist(rng));
    auto r = stream.write(data.subspan(offset, want));
    if (!r) {
      if (r.is(Errc::would_block)) {
        ++would_blocks;
        return;
      }
      error = r.error();
      stream.on_writable({});
      return;
    }
    if (r.value() < want) ++partial_writes;
    offset += r.value();
  }
  stream.on_writable({});
  if (shutdown_at_end) {
    if (auto r = stream.shutdown_write(); !r) error = r.error();
  }
  done = true;
}

Reader::Reader(Stream& s, std::uint32_t seed, std::size_t max, bool armed)
    : stream(s), rng(seed), max_chunk(max) {
  if (armed) arm();
}

void Reader::arm() {
  stream.on_readable([this] { step(); });
}

void Reader::step() {
  read_some(SIZE_MAX);
}

void Reader::read_some(std::size_t limit) {
  std::uniform_int_distribution<std::size_t> dist(1, max_chunk);
  std::vector<std::byte> buf;
  std::size_t total = 0;
  while (total < limit && !eof && !error) {
    buf.resize(std::min(dist(rng), limit - total));
    auto r = stream.read(buf);
    if (!r) {
      if (!r.is(Errc::would_block)) error = r.error();
      break;
    }
    if (r.value() == 0) {
      eof = true;
      break;
    }
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(r.value()));
    total += r.value();
  }
  if (eof || error) stream.on_readable({});
}

}  // namespace rmsg::testing
