// rmsg-perf --test scale: N connections, client and server ends in this process on ONE
// loop thread (docs/perf.md, "Many connections"). Phases:
//   connect  N connects through the transport, at most --window in flight (the listener's
//            max_inbound_handshakes bounds a burst), until every end is up and every
//            server end has read its 8-byte header (the connection's index);
//   idle     the process's pinned memory, descriptors and the kernel's RDMA objects,
//            against a census taken before the listener: per END (a node's share of a
//            connection), since both ends live here;
//   all      every connection streams --size bytes in total (default 64 MiB) divided
//            among them, client to server; every byte is checked against a pattern of
//            (connection, offset);
//   ten      the same bytes over the first 10 connections only, the rest idle.
// Loop stall: EventLoop counters loop.iteration_ns (per-phase p99 bounds) and
// loop.iteration_max_ns (the longest iteration of the run). RNR: the change in rxe's
// hw_counters over the run.
#include "scale_test.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loop/loop_stats.h"
#if RMSG_WITH_RDMA
#include "rdma/setup_budget.h"
#endif
#include "rmsg/rdma.h"
#include "scale_probe.h"
#include "scale_raw.h"
#include "stream_transport.h"

namespace rmsg::perf {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using Buckets = std::array<std::uint64_t, Histogram::kBuckets>;

constexpr std::size_t kChunk = 64 * 1024;
constexpr std::size_t kPatternPeriod = 251;   // prime: offsets and indices mix
constexpr std::uint32_t kMagic = 0x53434c45;  // "SCLE"

std::size_t pattern_at(std::uint32_t idx, std::uint64_t off) {
  return static_cast<std::size_t>((off + std::uint64_t{idx} * 131) % kPatternPeriod);
}

struct Shared {
  std::vector<std::byte> pattern;  // period + one chunk: any window of a chunk is a slice
  std::uint64_t received = 0;      // payload bytes checked, all server ends
  std::uint64_t expected = 0;
  std::size_t headers = 0;  // server ends that read their header
  std::error_code error;
  std::string what;
  void fail(std::error_code ec, std::string w) {
    if (!error) {
      error = ec;
      what = std::move(w);
    }
  }
};

// A client end: writes its header, then `todo` pattern bytes whenever given some.
class ClientEnd {
 public:
  ClientEnd(Shared& sh, Stream s, std::uint32_t idx) : sh_(sh), s_(std::move(s)), idx_(idx) {
    const std::uint32_t h[2] = {kMagic, idx};
    std::memcpy(hdr_.data(), h, sizeof h);
    s_.on_writable([this] { pump(); });
    pump();
  }
  void give(std::uint64_t n) {
    todo_ += n;
    pump();
  }
  Stream& stream() { return s_; }

 private:
  void pump() {
    while (hdr_sent_ < hdr_.size() || todo_ > 0) {
      std::span<const std::byte> out;
      if (hdr_sent_ < hdr_.size()) {
        out = std::span(hdr_).subspan(hdr_sent_);
      } else {
        out = std::span(sh_.pattern)
                  .subspan(pattern_at(idx_, off_), std::min<std::uint64_t>(todo_, kChunk));
      }
      auto n = s_.write(out);
      if (!n) {
        if (!n.is(Errc::would_block)) sh_.fail(n.error(), "write");
        return;
      }
      if (hdr_sent_ < hdr_.size()) {
        hdr_sent_ += *n;
      } else {
        off_ += *n;
        todo_ -= *n;
      }
    }
  }

  Shared& sh_;
  Stream s_;
  std::uint32_t idx_;
  std::array<std::byte, 8> hdr_{};
  std::size_t hdr_sent_ = 0;
  std::uint64_t todo_ = 0;
  std::uint64_t off_ = 0;
};

// A server end: reads the header, then checks every byte it reads.
class ServerEnd {
 public:
  ServerEnd(Shared& sh, Stream s) : sh_(sh), s_(std::move(s)) {
    s_.on_readable([this] { drain(); });
  }

 private:
  void drain() {
    for (;;) {
      const bool in_header = hdr_got_ < hdr_.size();
      auto dst = in_header ? std::span(hdr_).subspan(hdr_got_) : std::span(buf_);
      auto n = s_.read(dst);
      if (!n) {
        if (!n.is(Errc::would_block)) sh_.fail(n.error(), "read");
        return;
      }
      if (*n == 0) return sh_.fail(make_error_code(Errc::peer_closed), "read: early EOF");
      if (in_header) {
        hdr_got_ += *n;
        if (hdr_got_ < hdr_.size()) continue;
        std::uint32_t h[2];
        std::memcpy(h, hdr_.data(), sizeof h);
        if (h[0] != kMagic) return sh_.fail(make_error_code(Errc::protocol_error), "bad header");
        idx_ = h[1];
        ++sh_.headers;
        continue;
      }
      if (std::memcmp(buf_.data(), sh_.pattern.data() + pattern_at(idx_, off_), *n) != 0) {
        return sh_.fail(make_error_code(Errc::protocol_error),
                        "byte mismatch on connection " + std::to_string(idx_) + " near offset " +
                            std::to_string(off_));
      }
      off_ += *n;
      sh_.received += *n;
    }
  }

  Shared& sh_;
  Stream s_;
  std::array<std::byte, 8> hdr_{};
  std::size_t hdr_got_ = 0;
  std::uint32_t idx_ = 0;
  std::uint64_t off_ = 0;
  std::array<std::byte, kChunk> buf_{};
};

double per(std::int64_t after, std::int64_t before, std::size_t n) {
  if (after < 0 || before < 0 || n == 0) return -1;
  return static_cast<double>(after - before) / static_cast<double>(n);
}

std::int64_t delta(std::int64_t after, std::int64_t before) {
  return after < 0 || before < 0 ? -1 : after - before;
}

Buckets minus(Buckets a, const Buckets& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] -= b[i];
  return a;
}

double secs(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int run_scale_test(const Options& o) {
  std::string transport = o.transport;
  if (transport == "auto") transport = rdma_device_available() ? "rdma" : "tcp";
  const StreamTransport* t = find_stream_transport(transport);
  if (t == nullptr || (transport != "rdma" && transport != "tcp")) {
    std::fprintf(stderr, "rmsg-perf: --test scale runs over rdma or tcp, not '%s'\n",
                 transport.c_str());
    return 2;
  }
  if (t->unavailable_reason) {
    if (auto why = t->unavailable_reason(); !why.empty()) {
      std::fprintf(stderr, "rmsg-perf: %s: %s\n", transport.c_str(), why.c_str());
      return 1;
    }
  }
  const std::size_t n = o.connections;
  const std::size_t window = std::max<std::size_t>(1, o.window);
  const std::uint64_t total = o.sizes.empty() ? (64u << 20) : o.sizes.front();
  // Two ends per connection, each a few descriptors today; room for the rest.
  const std::uint64_t nofile = raise_nofile(8 * n + 256);

  RunOptions ro;
  ro.block_count = o.block_count;
  ro.block_size = o.block_size;
  ro.setup_calls = o.setup_calls;
  // Both ends of every connection live on this loop: one pool for 2n streams.
  if (o.shared_receive) ro.shared_connections = static_cast<std::uint32_t>(2 * n);
  std::string host = o.host;
  if (host.empty()) host = t->local_host ? t->local_host() : "127.0.0.1";
  auto local = SocketAddress::from_host_port(host, 0);
  if (!local) {
    std::fprintf(stderr, "rmsg-perf: bad --address '%s'\n", host.c_str());
    return 2;
  }
  EventLoopOptions lo;
  if (o.poll_spin_us >= 0) lo.poll_spin = std::chrono::microseconds(o.poll_spin_us);
  auto made = EventLoop::create(lo);
  if (!made) {
    std::fprintf(stderr, "rmsg-perf: cannot create a loop: %s\n", made.error().message().c_str());
    return 1;
  }
  EventLoop& loop = **made;
  loop.set_busy_poll(o.busy_poll);
  const Histogram* iter_h = loop.counters().find_histogram("loop.iteration_ns");

  Shared sh;
  sh.pattern.resize(kPatternPeriod + kChunk);
  for (std::size_t i = 0; i < sh.pattern.size(); ++i) {
    sh.pattern[i] = static_cast<std::byte>((i % kPatternPeriod) * 97 + 13);
  }

  const auto census0 = transport == "rdma" ? rdma_census() : RdmaCensus{};
  const auto pin0 = vm_pin_bytes();
  const auto fds0 = open_fds();
  const auto rnr0 = rnr_counter_sum();

  std::vector<std::unique_ptr<ServerEnd>> servers;
  std::vector<std::unique_ptr<ClientEnd>> clients;
  servers.reserve(n);
  clients.reserve(n);
  auto listener = t->listen(loop, *local, ro, [&](Stream s) {
    servers.push_back(std::make_unique<ServerEnd>(sh, std::move(s)));
  });
  if (!listener) {
    std::fprintf(stderr, "rmsg-perf: listen on %s: %s\n", host.c_str(),
                 listener.error().message().c_str());
    return 1;
  }
  SocketAddress target = *local;
  target.set_port(listener->port());

  // Connect phase.
  const Buckets h0 = iter_h ? loop::snapshot(*iter_h) : Buckets{};
  std::size_t started = 0, in_flight = 0;
  std::function<void()> next = [&] {
    while (started < n && in_flight < window && !sh.error) {
      const auto idx = static_cast<std::uint32_t>(started++);
      ++in_flight;
      t->connect(loop, target, ro, [&, idx](Result<Stream> r) {
        --in_flight;
        if (!r) {
          sh.fail(r.error(), "connect " + std::to_string(idx));
          return;
        }
        clients.push_back(std::make_unique<ClientEnd>(sh, std::move(r).value(), idx));
        next();
      });
    }
  };
  const auto c0 = SteadyClock::now();
  next();
  const auto limit = 60s + std::chrono::milliseconds(200) * n;
  const bool connected =
      loop.run_for([&] { return sh.error || (clients.size() == n && sh.headers == n); }, limit);
  const auto c1 = SteadyClock::now();
  const Buckets h1 = iter_h ? loop::snapshot(*iter_h) : Buckets{};
  if (!connected || sh.error) {
    std::fprintf(stderr, "rmsg-perf: scale: %zu of %zu connected, %zu accepted (%s%s%s)\n",
                 clients.size(), n, servers.size(), sh.what.c_str(), sh.error ? ": " : "",
                 sh.error ? sh.error.message().c_str() : "timeout");
    return 1;
  }

  // Idle census: both ends of each connection live here.
  const auto census1 = transport == "rdma" ? rdma_census() : RdmaCensus{};
  const auto pin1 = vm_pin_bytes();
  const auto fds1 = open_fds();
  const std::size_t ends = 2 * n;

  // Data phases.
  auto phase = [&](std::size_t active) -> double {
    const std::uint64_t each = std::max<std::uint64_t>(1, total / active);
    sh.expected += each * active;
    const auto t0 = SteadyClock::now();
    for (std::size_t i = 0; i < active; ++i) clients[i]->give(each);
    if (!loop.run_for([&] { return sh.error || sh.received >= sh.expected; },
                      60s + std::chrono::seconds(total >> 22))) {
      sh.fail(make_error_code(Errc::timeout), "data phase");
    }
    return secs(t0, SteadyClock::now());
  };
  const std::uint64_t before_all = sh.expected;
  const double all_s = phase(n);
  const std::uint64_t all_bytes = sh.expected - before_all;
  const std::uint64_t before_ten = sh.expected;
  const double ten_s = sh.error ? 0 : phase(std::min<std::size_t>(10, n));
  const std::uint64_t ten_bytes = sh.expected - before_ten;
  const Buckets h2 = iter_h ? loop::snapshot(*iter_h) : Buckets{};
  // A failed data phase still reports the idle census and the loop's numbers (the MB/s
  // of a phase that did not finish are 0), then fails.
  if (sh.error) {
    std::fprintf(stderr, "rmsg-perf: scale: %s: %s\n", sh.what.c_str(), sh.error.message().c_str());
  }
  const auto rnr1 = rnr_counter_sum();
  // The reference beside rmsg's numbers: 10 raw-verbs QPs moving the same bytes in 64 KiB
  // SENDs, after the RNR counters were read (the raw baseline paces itself with RNR).
  const double mb_raw10 = transport == "rdma" && !sh.error && total >= (64u << 10) * 10
                              ? raw_verbs_mb_per_s(host, 10, total, 64u << 10)
                              : -1;

  const double connect_s = secs(c0, c1);
  const double registered =
      transport == "rdma"
          ? [&] {
              RdmaOptions r;
              if (ro.block_count != 0) r.send_block_count = r.recv_block_count = ro.block_count;
              if (ro.block_size != 0) r.send_block_size = r.recv_block_size = ro.block_size;
              const std::uint64_t send = std::uint64_t{r.send_block_count} * r.send_block_size;
              if (ro.shared_connections != 0) {  // the send ring and a share of the pool
                if (ro.block_size != 0) r.shared_block_size = ro.block_size;
                if (ro.block_count != 0) r.shared_guaranteed = ro.block_count;
                const std::uint64_t pool =
                    (std::uint64_t{ro.shared_connections} * r.shared_guaranteed +
                     r.shared_lease_blocks) *
                    r.shared_block_size;
                return static_cast<double>(send) +
                       static_cast<double>(pool) / ro.shared_connections;
              }
              return static_cast<double>(send +
                                         std::uint64_t{r.recv_block_count} * r.recv_block_size);
            }()
          : 0.0;
  const double pinned = per(pin1, pin0, ends);
  const double fds = per(fds1, fds0, ends);
  const auto qps = delta(census1.qp, census0.qp);
  const auto cqs = delta(census1.cq, census0.cq);
  const auto mrs = delta(census1.mr, census0.mr);
  const double connects_per_s = connect_s > 0 ? static_cast<double>(n) / connect_s : 0;
  const double max_stall_us =
      static_cast<double>(loop.counters().value("loop.iteration_max_ns")) / 1e3;
  // A bucket's bound can exceed the longest iteration: the p99 is at most that.
  const auto p99 = [&](const Buckets& b) {
    return std::min(static_cast<double>(loop::quantile_bound(b, 0.99)) / 1e3, max_stall_us);
  };
  const double p99_us = p99(minus(h2, h0));
  const double p99_connect_us = p99(minus(h1, h0));
  const double p99_data_us = p99(minus(h2, h1));
  const auto rnr = delta(rnr1, rnr0);
  const bool all_ok = !sh.error || sh.received >= all_bytes;
  const double mb_all = all_ok && all_s > 0 ? static_cast<double>(all_bytes) / all_s / 1e6 : 0;
  const double mb_ten = !sh.error && ten_s > 0 ? static_cast<double>(ten_bytes) / ten_s / 1e6 : 0;
  if (registered > 0 && pinned >= 0 && (pinned < 0.9 * registered || pinned > 1.1 * registered)) {
    std::fprintf(stderr,
                 "rmsg-perf: scale: VmPin says %.0f B pinned per end, the rings %.0f B: the "
                 "registrations are not what the geometry says\n",
                 pinned, registered);
  }
  std::uint64_t setup_deferred = 0, setup_max = 0;
#if RMSG_WITH_RDMA
  if (transport == "rdma") {
    const auto& c = rdma::SetupBudget::of(loop)->counters();
    setup_deferred = c.value("setup.deferred");
    setup_max = c.value("setup.max_calls_per_iteration");
  }
#endif
  if (o.json) {
    std::printf(
        "{\"test\":\"scale\",\"ok\":%s,\"transport\":\"%s\",\"connections\":%zu,\"window\":%zu,"
        "\"pinned_bytes_per_conn\":%.0f,\"registered_bytes_per_conn\":%.0f,"
        "\"fds_per_conn\":%.2f,\"qps\":%lld,\"cqs\":%lld,\"mrs\":%lld,"
        "\"connects_per_s\":%.1f,\"max_loop_stall_us\":%.0f,\"loop_p99_us\":%.0f,"
        "\"connect_loop_p99_us\":%.0f,\"data_loop_p99_us\":%.0f,\"rnr\":%lld,"
        "\"mb_per_s_all\":%.1f,\"mb_per_s_10\":%.1f,\"bytes_checked\":%llu,\"nofile\":%llu,"
        "\"setup_deferred\":%llu,\"setup_max_calls_per_iteration\":%llu,"
        "\"mb_per_s_raw10\":%.1f}\n",
        sh.error ? "false" : "true", transport.c_str(), n, window, pinned, registered, fds,
        static_cast<long long>(qps), static_cast<long long>(cqs), static_cast<long long>(mrs),
        connects_per_s, max_stall_us, p99_us, p99_connect_us, p99_data_us,
        static_cast<long long>(rnr), mb_all, mb_ten, static_cast<unsigned long long>(sh.received),
        static_cast<unsigned long long>(nofile), static_cast<unsigned long long>(setup_deferred),
        static_cast<unsigned long long>(setup_max), mb_raw10);
  } else {
    std::printf("rmsg-perf: scale over %s on %s, %zu connections (both ends here, %zu in flight)\n",
                transport.c_str(), host.c_str(), n, window);
    std::printf("  per end at idle: pinned %.0f B (rings %.0f B), fds %.2f\n", pinned, registered,
                fds);
    std::printf("  kernel objects: qp %lld cq %lld mr %lld\n", static_cast<long long>(qps),
                static_cast<long long>(cqs), static_cast<long long>(mrs));
    std::printf("  connects/s %.1f (%.2f s for all)\n", connects_per_s, connect_s);
    std::printf("  loop: longest iteration %.0f us, p99 < %.0f us (connect < %.0f, data < %.0f)\n",
                max_stall_us, p99_us, p99_connect_us, p99_data_us);
    std::printf("  setup: %llu accepts deferred, at most %llu calls in one iteration\n",
                static_cast<unsigned long long>(setup_deferred),
                static_cast<unsigned long long>(setup_max));
    std::printf("  rnr %lld; MB/s all %.1f, 10 active %.1f; %llu bytes checked\n",
                static_cast<long long>(rnr), mb_all, mb_ten,
                static_cast<unsigned long long>(sh.received));
    if (mb_raw10 >= 0) std::printf("  reference: 10 raw-verbs QPs %.1f MB/s\n", mb_raw10);
  }
  // Abortive teardown: the numbers are taken.
  clients.clear();
  servers.clear();
  return sh.error ? 1 : 0;
}

}  // namespace rmsg::perf
