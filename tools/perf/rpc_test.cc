// Rows (--json: one object per line):
//   {"test":"rpc", transport, size, outstanding, iters, median_us, p99_us, calls_per_s
//    [, "baseline":"stream", "vs_baseline": rpc median / stream ping-pong median]}
//   {"test":"stream_pingpong", transport, size, iters, median_us, p99_us, round_trips_per_s}
//   {"test":"rpc_oneway", transport, size, msgs_per_s, "baseline":"stream_write", vs_baseline}
//   {"test":"stream_write", transport, size, msgs_per_s}
// Latencies are round trips (call to completion), measured with the steady clock.
#include "rpc_test.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "rmsg/rdma.h"
#include "rmsg/rpc.h"
#include "rpc_baseline.h"
#include "stream_transport.h"

namespace rmsg::perf {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const auto k =
      std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

struct Endpoints {
  std::unique_ptr<RpcEndpoint> server;
  std::unique_ptr<RpcEndpoint> client;
  std::uint64_t oneway_received = 0;
};

Result<std::unique_ptr<Endpoints>> make_endpoints(EventLoop& loop, const ConnectionParams& params,
                                                  const SocketAddress& local, std::uint64_t size) {
  auto e = std::make_unique<Endpoints>();
  RpcOptions so;
  so.messenger.node_id = 1;
  so.messenger.max_message_size = std::max<std::size_t>(size + 64, std::size_t{4} << 20);
  RpcOptions co = so;
  co.messenger.node_id = 2;
  auto s = RpcEndpoint::create(loop, so);
  if (!s) return s.error();
  e->server = std::move(s).value();
  auto c = RpcEndpoint::create(loop, co);
  if (!c) return c.error();
  e->client = std::move(c).value();
  e->server->handle(1, [](const RpcRequest& r, RpcResponder reply) { reply.ok(r.body); });
  Endpoints* ep = e.get();
  e->server->handle_oneway(2, [ep](const RpcRequest&) { ++ep->oneway_received; });
  auto bound = e->server->messenger().listen(local, params);
  if (!bound) return bound.error();
  ConnectionParams p = params;
  auto addr = SocketAddress::parse(bound.value());
  if (!addr) return addr.error();
  p.peer = addr.value();
  RMSG_TRY(e->client->messenger().add_peer(1, p));
  return e;
}

struct RpcResult {
  std::vector<double> us;
  double calls_per_s = 0;
};

// `iters` echo calls, `depth` outstanding at a time (after a tenth as warmup).
Result<RpcResult> run_calls(EventLoop& loop, Endpoints& e, std::uint64_t size, std::size_t depth,
                            std::uint64_t iters) {
  const std::vector<std::byte> body(size, std::byte{0x5a});
  const std::uint64_t warmup = iters / 10;
  const std::uint64_t total = warmup + iters;
  std::uint64_t issued = 0;
  std::uint64_t completed = 0;
  std::error_code err;
  RpcResult out;
  out.us.reserve(iters);
  SteadyClock::time_point start{};
  auto issue = [&](auto& self) -> void {
    while (issued < total && issued - completed < depth && !err) {
      const std::uint64_t n = issued++;
      if (n == warmup) start = SteadyClock::now();
      const auto t0 = SteadyClock::now();
      auto r = e.client->call(
          1, 1, body, {.deadline = loop.now() + 30s}, [&, t0, n, self](RpcResponse resp) {
            ++completed;
            if (resp.error) err = resp.error;
            if (n >= warmup) {
              out.us.push_back(
                  std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count());
            }
            self(self);
          });
      if (!r) err = r.error();
    }
  };
  issue(issue);
  if (!loop.run_for([&] { return completed == total || err; }, 120s)) return Errc::timeout;
  if (err) return err;
  const double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();
  out.calls_per_s = static_cast<double>(iters) / secs;
  return out;
}

// One-way messages per second: `count` notify()s, each fully received.
Result<double> run_oneway(EventLoop& loop, Endpoints& e, std::uint64_t size, std::uint64_t count) {
  const std::vector<std::byte> body(size, std::byte{0x5a});
  const std::uint64_t base = e.oneway_received;
  const auto t0 = SteadyClock::now();
  for (std::uint64_t i = 0; i < count;) {
    auto r = e.client->notify(1, 2, body);
    if (r) {
      ++i;
      continue;
    }
    if (!r.is(Errc::resource_exhausted)) return r.error();
    const std::uint64_t seen = e.oneway_received;
    if (!loop.run_for([&] { return e.oneway_received > seen; }, 30s)) return Errc::timeout;
  }
  if (!loop.run_for([&] { return e.oneway_received - base >= count; }, 60s)) {
    return Errc::timeout;
  }
  const double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return static_cast<double>(count) / secs;
}

int fail(const std::string& what, std::error_code ec) {
  std::fprintf(stderr, "rmsg-perf: rpc: %s: %s\n", what.c_str(), ec.message().c_str());
  return 1;
}

}  // namespace

int run_rpc_test(const Options& o) {
  std::string transport = o.transport;
  if (transport == "auto") transport = rdma_device_available() ? "rdma" : "tcp";
  if (transport != "rdma" && transport != "tcp") {
    std::fprintf(stderr, "rmsg-perf: --test rpc runs over rdma or tcp, not '%s'\n",
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
  auto lp = EventLoop::create();
  if (!lp) return fail("cannot create a loop", lp.error());
  EventLoop& loop = **lp;
  loop.set_busy_poll(o.busy_poll);
  ConnectionParams params;
  params.transport = transport == "rdma" ? Transport::rdma : Transport::tcp;
  const std::vector<std::uint64_t> sizes =
      o.sizes.empty() ? std::vector<std::uint64_t>{64, 4096} : o.sizes;
  const std::vector<std::uint64_t> depths =
      o.outstanding.empty() ? std::vector<std::uint64_t>{1, 16, 128} : o.outstanding;
  const std::uint64_t iters = o.iters != 0 ? o.iters : (transport == "rdma" ? 5000 : 20000);
  const std::uint64_t stream_count = iters * 5;
  const char* tr = transport.c_str();
  if (!o.json) {
    std::printf("rmsg-perf: rpc over %s on %s, client and server on one loop thread\n", tr,
                host.c_str());
    std::printf("%-16s %-5s %8s %5s %8s %10s %10s %12s %8s\n", "test", "tr", "size", "depth",
                "iters", "median_us", "p99_us", "per_s", "vs_base");
  }
  for (const std::uint64_t size : sizes) {
    auto pp = stream_ping_pong(loop, params, *local, size, iters);
    if (!pp) return fail("stream ping-pong", pp.error());
    const double base_median = quantile(pp->rtt_us, 0.5);
    const double base_p99 = quantile(pp->rtt_us, 0.99);
    const double rtt_per_s = static_cast<double>(iters) / pp->elapsed_s;
    if (o.json) {
      std::printf(
          "{\"test\":\"stream_pingpong\",\"transport\":\"%s\",\"size\":%llu,\"iters\":%llu,"
          "\"median_us\":%.2f,\"p99_us\":%.2f,\"round_trips_per_s\":%.0f}\n",
          tr, static_cast<unsigned long long>(size), static_cast<unsigned long long>(iters),
          base_median, base_p99, rtt_per_s);
    } else {
      std::printf("%-16s %-5s %8llu %5s %8llu %10.2f %10.2f %12.0f %8s\n", "stream_pingpong", tr,
                  static_cast<unsigned long long>(size), "-",
                  static_cast<unsigned long long>(iters), base_median, base_p99, rtt_per_s, "");
    }
    auto eps = make_endpoints(loop, params, *local, size);
    if (!eps) return fail("endpoints", eps.error());
    for (const std::uint64_t depth : depths) {
      auto r = run_calls(loop, **eps, size, depth, iters);
      if (!r) return fail("calls", r.error());
      const double med = quantile(r->us, 0.5);
      const double p99 = quantile(r->us, 0.99);
      const double vs = base_median > 0 ? med / base_median : 0;
      if (o.json) {
        std::printf(
            "{\"test\":\"rpc\",\"transport\":\"%s\",\"size\":%llu,\"outstanding\":%llu,"
            "\"iters\":%llu,\"median_us\":%.2f,\"p99_us\":%.2f,\"calls_per_s\":%.0f",
            tr, static_cast<unsigned long long>(size), static_cast<unsigned long long>(depth),
            static_cast<unsigned long long>(iters), med, p99, r->calls_per_s);
        if (depth == 1) std::printf(",\"baseline\":\"stream\",\"vs_baseline\":%.3f", vs);
        std::printf("}\n");
      } else {
        std::printf("%-16s %-5s %8llu %5llu %8llu %10.2f %10.2f %12.0f %8s\n", "rpc", tr,
                    static_cast<unsigned long long>(size), static_cast<unsigned long long>(depth),
                    static_cast<unsigned long long>(iters), med, p99, r->calls_per_s,
                    depth == 1 ? (std::to_string(vs).substr(0, 5) + "x").c_str() : "");
      }
    }
    auto sw = stream_streaming(loop, params, *local, size, stream_count);
    if (!sw) return fail("stream streaming", sw.error());
    auto ow = run_oneway(loop, **eps, size, stream_count);
    if (!ow) return fail("one-way", ow.error());
    const double vs = sw.value() > 0 ? ow.value() / sw.value() : 0;
    if (o.json) {
      std::printf(
          "{\"test\":\"stream_write\",\"transport\":\"%s\",\"size\":%llu,"
          "\"msgs_per_s\":%.0f}\n",
          tr, static_cast<unsigned long long>(size), sw.value());
      std::printf(
          "{\"test\":\"rpc_oneway\",\"transport\":\"%s\",\"size\":%llu,"
          "\"msgs_per_s\":%.0f,\"baseline\":\"stream_write\",\"vs_baseline\":%.3f}\n",
          tr, static_cast<unsigned long long>(size), ow.value(), vs);
    } else {
      std::printf("%-16s %-5s %8llu %5s %8llu %10s %10s %12.0f %8s\n", "stream_write", tr,
                  static_cast<unsigned long long>(size), "-",
                  static_cast<unsigned long long>(stream_count), "", "", sw.value(), "");
      std::printf("%-16s %-5s %8llu %5s %8llu %10s %10s %12.0f %7.3fx\n", "rpc_oneway", tr,
                  static_cast<unsigned long long>(size), "-",
                  static_cast<unsigned long long>(stream_count), "", "", ow.value(), vs);
    }
    if (o.counters) (*eps)->client->counters().dump(std::cerr);
  }
  return 0;
}

}  // namespace rmsg::perf
