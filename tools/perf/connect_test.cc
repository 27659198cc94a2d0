// The connect test. Each measured connect is one ConnectionManager::connect on a loop
// that also runs the (managed) listener: from the call to the callback, with the phases
// its ConnectReport gives. Every connection is closed on both sides before the next.
//   fresh:  a manager whose pool keeps nothing (max_idle 0): every connect builds both
//           sides' structures anew.
//   reused: a manager that keeps them: connections are made in batches, and before each
//           batch the previous one's structures are recycled and idle (after their
//           TIMEWAIT_EXIT), so every measured connect takes an idle structure per side.
// connects_per_s = measured connects / the time spent inside them (recycling waits
// between batches excluded). TCP pools nothing: its two modes do the same thing.
#include "connect_test.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rmsg/connection_manager.h"
#include "stream_transport.h"

namespace rmsg::perf {
namespace {

using namespace std::chrono_literals;

struct Sample {
  double total_us, resolve_us, resources_us, handshake_us;
  bool reused;
};

double us(Duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const auto k =
      std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

class ConnectBench {
 public:
  ConnectBench(EventLoop& loop, ConnectionParams params) : loop_(loop), params_(params) {}

  // Builds the manager and its listener; `keep` = how many idle structures it may keep.
  Result<void> start(const SocketAddress& local, std::size_t keep) {
    ConnectionManagerOptions o;
    o.max_idle = keep;
    auto m = ConnectionManager::create(loop_, o);
    if (!m) return m.error();
    manager_ = std::move(m).value();
    auto l =
        manager_->listen(local, params_, [this](Stream s) { accepted_.push_back(std::move(s)); });
    if (!l) return l.error();
    listener_ = std::move(l).value();
    params_.peer = local;
    params_.peer.set_port(listener_.port());
    return {};
  }

  // One connect, accepted and closed on both sides.
  Result<Sample> once() {
    std::optional<Result<Stream>> got;
    ConnectReport report;
    manager_->connect(params_, [&](Result<Stream> r, const ConnectReport& rep) {
      got.emplace(std::move(r));
      report = rep;
    });
    if (!loop_.run_for([&] { return got.has_value() && (!got->ok() || !accepted_.empty()); },
                       30s)) {
      return Errc::timeout;
    }
    if (!got->ok()) return got->error();
    got->value().close();
    accepted_.clear();
    return Sample{us(report.total), us(report.resolve), us(report.resources), us(report.handshake),
                  report.reused};
  }

  // Until `n` structures are idle and nothing is recycling.
  bool settle(std::size_t n) {
    return loop_.run_for([&] { return manager_->idle() >= n && manager_->recycling() == 0; }, 30s);
  }

  ConnectionManager& manager() { return *manager_; }

 private:
  EventLoop& loop_;
  ConnectionParams params_;
  std::unique_ptr<ConnectionManager> manager_;
  Listener listener_;
  std::vector<Stream> accepted_;
};

void report(const Options& o, const char* transport, const char* mode, const std::vector<Sample>& s,
            int threads) {
  std::vector<double> total, resolve, resources, handshake;
  double sum = 0;
  for (const auto& x : s) {
    total.push_back(x.total_us);
    resolve.push_back(x.resolve_us);
    resources.push_back(x.resources_us);
    handshake.push_back(x.handshake_us);
    sum += x.total_us;
  }
  const double per_s = sum > 0 ? static_cast<double>(s.size()) / (sum / 1e6) : 0;
  if (o.json) {
    std::printf(
        "{\"test\":\"connect\",\"transport\":\"%s\",\"mode\":\"%s\",\"iters\":%zu,"
        "\"median_us\":%.1f,\"p99_us\":%.1f,\"connects_per_s\":%.1f,\"threads\":%d,"
        "\"resolve_median_us\":%.1f,\"resources_median_us\":%.1f,"
        "\"handshake_median_us\":%.1f}\n",
        transport, mode, s.size(), quantile(total, 0.5), quantile(total, 0.99), per_s, threads,
        quantile(resolve, 0.5), quantile(resources, 0.5), quantile(handshake, 0.5));
    return;
  }
  std::printf("%-5s %-7s %6zu %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %7d\n", transport, mode,
              s.size(), quantile(total, 0.5), quantile(total, 0.99), per_s, quantile(resolve, 0.5),
              quantile(resources, 0.5), quantile(handshake, 0.5), threads);
}

Result<std::vector<Sample>> run_mode(EventLoop& loop, const ConnectionParams& params,
                                     const SocketAddress& local, bool reuse, std::uint64_t iters) {
  // Batches of reused connects: each needs an idle structure per side, recycled before.
  const std::size_t batch = std::min<std::uint64_t>(iters, 32);
  const bool pooled = reuse && params.transport == Transport::rdma;
  ConnectBench bench(loop, params);
  RMSG_TRY(bench.start(local, pooled ? 2 * batch : 0));
  std::vector<Sample> samples;
  Progress progress(std::string("connect ") + (reuse ? "reused" : "fresh"));
  if (pooled) {
    // Warm-up: build `batch` structures per side, to be recycled before the first batch.
    for (std::size_t i = 0; i < batch; ++i) {
      auto s = bench.once();
      if (!s) return s.error();
    }
  }
  while (samples.size() < iters) {
    if (pooled && !bench.settle(2 * batch)) return Errc::timeout;
    const std::size_t n = pooled ? std::min<std::size_t>(batch, iters - samples.size()) : 1;
    for (std::size_t i = 0; i < n; ++i) {
      auto s = bench.once();
      if (!s) return s.error();
      if (pooled && !s->reused) {
        std::fprintf(stderr, "rmsg-perf: a connect in reused mode built a new structure\n");
      }
      samples.push_back(s.value());
      progress.update(samples.size(), iters);
    }
  }
  return samples;
}

}  // namespace

int run_connect_test(const Options& o) {
  std::string transport = o.transport;
  if (transport == "auto") transport = rdma_device_available() ? "rdma" : "tcp";
  if (transport != "rdma" && transport != "tcp") {
    std::fprintf(stderr, "rmsg-perf: --test connect runs over rdma or tcp, not '%s'\n",
                 transport.c_str());
    return 2;
  }
  std::string host = o.host;
  if (host.empty()) {
    const auto* t = find_stream_transport(transport);
    host = t != nullptr && t->local_host ? t->local_host() : "127.0.0.1";
  }
  auto local = SocketAddress::from_host_port(host, 0);
  if (!local) {
    std::fprintf(stderr, "rmsg-perf: bad --address '%s'\n", host.c_str());
    return 2;
  }
  auto loop = EventLoop::create();
  if (!loop) {
    std::fprintf(stderr, "rmsg-perf: cannot create a loop: %s\n", loop.error().message().c_str());
    return 1;
  }
  (*loop)->set_busy_poll(o.busy_poll);
  ConnectionParams params;
  params.transport = transport == "rdma" ? Transport::rdma : Transport::tcp;
  const std::uint64_t iters = o.iters != 0 ? o.iters : (transport == "rdma" ? 200 : 2000);
  if (!o.json) {
    std::printf("rmsg-perf: connect over %s on %s, client and server on one loop thread\n",
                transport.c_str(), local->host().c_str());
    std::printf("%-5s %-7s %6s %10s %10s %10s %10s %10s %10s %7s\n", "", "mode", "iters",
                "median_us", "p99_us", "conn/s", "resolve", "resources", "handshake", "threads");
  }
  for (const bool reuse : {false, true}) {
    auto samples = run_mode(**loop, params, *local, reuse, iters);
    if (!samples) {
      std::fprintf(stderr, "rmsg-perf: connect %s over %s: %s\n", reuse ? "reused" : "fresh",
                   transport.c_str(), samples.error().message().c_str());
      return 1;
    }
    report(o, transport.c_str(), reuse ? "reused" : "fresh", samples.value(), thread_count());
  }
  return 0;
}

}  // namespace rmsg::perf
