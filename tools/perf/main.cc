// rmsg-perf: latency and bandwidth of rmsg's transports, each result next to a baseline
// (plain blocking sockets) measured in the same run. See docs/perf.md.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <optional>
#include <string>

#include "connect_test.h"
#include "options.h"
#include "report.h"
#include "rpc_test.h"
#include "scale_test.h"
#if RMSG_WITH_RDMA
#include "failover_test.h"
#endif
#include "stream_runner.h"

namespace rmsg::perf {
namespace {

// Messages in the unreported warm-up round before a test's first size (see run()).
constexpr std::uint64_t kWarmupRoundMessages = 200;

// The transport --transport names, or why there is none.
const StreamTransport* choose_transport(const std::string& name, std::string& why) {
  if (name == "auto") {
    const auto* rdma = find_stream_transport("rdma");
    if (rdma != nullptr && (!rdma->unavailable_reason || rdma->unavailable_reason().empty())) {
      return rdma;
    }
    return find_stream_transport("tcp");
  }
  const auto* t = find_stream_transport(name);
  if (t == nullptr) {
    std::string built;
    for (const auto* x : stream_transports()) built += std::string(x->name) + ", ";
    why = name == "rdma" ? "the rdma transport is not built into this rmsg-perf yet"
                         : "unknown transport '" + name + "'";
    why += " (available: " + built + "posix, verbs, auto)";
    return nullptr;
  }
  if (t->unavailable_reason) {
    if (auto reason = t->unavailable_reason(); !reason.empty()) {
      why = name + ": " + reason;
      return nullptr;
    }
  }
  return t;
}

struct Setup {
  std::unique_ptr<Runner> runner;
  std::unique_ptr<Runner> baseline;  // null: none
  std::string host;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "rmsg-perf: %s\n", what.c_str());
  return 1;
}

std::optional<Setup> make_setup(const Options& o, std::string& why) {
  RunOptions ro;
  ro.busy_poll = o.busy_poll;
  ro.poll_spin_us = o.poll_spin_us;
  ro.one_thread = o.one_thread;
  ro.counters = o.counters;
  ro.block_count = o.block_count;
  ro.block_size = o.block_size;
  ro.server_cpu = o.server_cpu;
  Setup s;
  s.host = o.host.empty() ? ro.host : o.host;
  if (o.transport == "posix" || o.transport == "verbs") {
    auto factory = find_runner(o.transport);
    if (!factory) {
      why = o.transport + " is not built into this rmsg-perf (RMSG_WITH_RDMA off)";
      return std::nullopt;
    }
    s.runner = factory(ro);
    // verbs needs a device's address, as the rdma transport does.
    const auto* rdma = find_stream_transport("rdma");
    if (o.transport == "verbs" && o.host.empty() && rdma && rdma->local_host) {
      s.host = rdma->local_host();
    }
  } else {
    const auto* t = choose_transport(o.transport, why);
    if (t == nullptr) return std::nullopt;
    if (o.host.empty() && t->local_host) s.host = t->local_host();
    auto r = make_stream_runner(*t, ro);
    if (!r) {
      why = "cannot create a loop: " + r.error().message();
      return std::nullopt;
    }
    s.runner = std::move(r).value();
    const std::string base = !o.baseline.empty()              ? o.baseline
                             : std::string(t->name) == "rdma" ? "verbs"
                                                              : "posix";
    if (base != "none") {
      auto factory = find_runner(base);
      if (!factory) {
        why = "unknown baseline '" + base + "'";
        return std::nullopt;
      }
      s.baseline = factory(ro);
    }
  }
  return s;
}

SocketAddress with_port(SocketAddress a, std::uint16_t port) {
  a.set_port(port);
  return a;
}

// --server: serve until SIGINT/SIGTERM.
int serve(Setup& s, const std::string& where) {
  auto addr = SocketAddress::parse(where);
  if (!addr) return fail("bad --server address '" + where + "' (numeric ADDR:PORT)");
  // A shell starts background jobs with SIGINT ignored; an ignored signal never reaches
  // sigwait(), so take the default (blocked below, so it terminates nothing).
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts
  auto main_server = s.runner->start_server(*addr);
  if (!main_server) return fail(s.runner->name() + " server: " + main_server.error().message());
  std::unique_ptr<Server> base_server;
  std::string note;
  if (s.baseline) {
    auto b = s.baseline->start_server(with_port(*addr, addr->port() + 1));
    if (!b) return fail(s.baseline->name() + " server: " + b.error().message());
    base_server = std::move(b).value();
    note = ", " + s.baseline->name() + " baseline on port " + std::to_string(base_server->port());
  }
  std::fprintf(stderr, "rmsg-perf: serving %s on %s%s; Ctrl-C stops\n", s.runner->name().c_str(),
               with_port(*addr, (*main_server)->port()).to_string().c_str(), note.c_str());
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}

std::optional<Row> measure(Runner& r, const SocketAddress& to, const Spec& spec, int& rc) {
  Progress progress(std::string(to_string(spec.test)) + " " + r.name() + " " +
                    std::to_string(spec.size) + " B");
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  auto m = r.run(to, spec, progress);
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  if (!m) {
    rc = fail(r.name() + " " + to_string(spec.test) + " " + std::to_string(spec.size) +
              " B against " + to.to_string() + ": " + m.error().message());
    return std::nullopt;
  }
  Row row = summarize(r.name(), spec, std::move(m).value());
  const auto us = [](const timeval& a, const timeval& b) {
    return static_cast<double>(b.tv_sec - a.tv_sec) * 1e6 +
           static_cast<double>(b.tv_usec - a.tv_usec);
  };
  const double n = spec.iters > 0 ? static_cast<double>(spec.iters) : 1.0;
  row.user_us_per_msg = us(before.ru_utime, after.ru_utime) / n;
  row.sys_us_per_msg = us(before.ru_stime, after.ru_stime) / n;
  return row;
}

int run(const Options& o) {
  if (o.connect_test) return run_connect_test(o);
  if (o.rpc_test) return run_rpc_test(o);
  if (o.scale_test) return run_scale_test(o);
#if RMSG_WITH_RDMA
  if (o.failover_test) return run_failover_test(o);
#else
  if (o.failover_test) {
    std::fprintf(stderr, "rmsg-perf: --test failover needs an RDMA build\n");
    return 2;
  }
#endif
  // Server threads pin themselves to S; pinning this thread there first checks that the
  // process may use S, then it moves to C (in --server mode it has no client to run).
  for (const int cpu : {o.server_cpu, o.server.empty() ? o.client_cpu : -1}) {
    if (cpu < 0) continue;
    if (auto r = pin_this_thread(cpu); !r) {
      return fail("--cpus: CPU " + std::to_string(cpu) + ": " + r.error().message());
    }
  }
  std::string why;
  auto setup = make_setup(o, why);
  if (!setup) return fail(why);
  auto& s = *setup;
  if (!o.server.empty()) return serve(s, o.server);

  SocketAddress target, base_target;
  std::unique_ptr<Server> server, base_server;
  if (!o.connect.empty()) {
    auto a = SocketAddress::parse(o.connect);
    if (!a) return fail("bad --connect address '" + o.connect + "' (numeric ADDR:PORT)");
    target = *a;
    base_target = with_port(*a, a->port() + 1);
  } else {
    auto local = SocketAddress::from_host_port(s.host, 0);
    if (!local) return fail("bad --address '" + s.host + "' (numeric host)");
    auto sv = s.runner->start_server(*local);
    if (!sv) return fail(s.runner->name() + " server on " + s.host + ": " + sv.error().message());
    server = std::move(sv).value();
    target = with_port(*local, server->port());
    if (s.baseline) {
      auto b = s.baseline->start_server(*local);
      if (!b) return fail(s.baseline->name() + " server: " + b.error().message());
      base_server = std::move(b).value();
      base_target = with_port(*local, base_server->port());
    }
  }
  if (!o.json) {
    std::string mode = o.connect.empty() ? "in-process over " : "to ";
    mode += target.to_string();
    if (o.one_thread && o.connect.empty()) mode += ", one loop thread";
    if (o.busy_poll) mode += ", busy-poll";
    std::printf("rmsg-perf: %s%s%s, %s\n", s.runner->name().c_str(), s.baseline ? " vs " : "",
                s.baseline ? s.baseline->name().c_str() : "", mode.c_str());
  }
  Report report(o.json);
  int rc = 0;
  const std::vector<Test> tests = o.tests.empty() ? std::vector{Test::lat, Test::bw} : o.tests;
  for (const Test test : tests) {
    for (const auto size : o.sizes.empty() ? default_sizes(test) : o.sizes) {
      const Spec spec = make_spec(test, size, o.iters);
      // A process's first messages pay for page faults, lazy binding and the first
      // connection's slow start: one short unreported round of each runner first, so that
      // the first row is not a warm-up read as a claim. Fixed in length, so the difference
      // of two --iters runs (bench/*_instructions.sh) does not contain it.
      if (size == (o.sizes.empty() ? default_sizes(test) : o.sizes).front()) {
        Spec warm = spec;
        warm.iters = kWarmupRoundMessages;
        warm.warmup = 0;
        if (s.baseline && !measure(*s.baseline, base_target, warm, rc)) return rc;
        if (!measure(*s.runner, target, warm, rc)) return rc;
      }
      std::vector<Row> base_rows, rows;
      // Rounds alternate baseline and transport, so that drift hits both alike.
      for (std::uint64_t round = 0; round < o.repeat; ++round) {
        if (s.baseline) {
          auto b = measure(*s.baseline, base_target, spec, rc);
          if (!b) return rc;
          base_rows.push_back(*b);
        }
        auto r = measure(*s.runner, target, spec, rc);
        if (!r) return rc;
        rows.push_back(*r);
      }
      Row row = median_row(rows);
      if (s.baseline) {
        const Row base = median_row(base_rows);
        set_ratio(row, base);
        set_round_ratios(row, rows, base_rows);
        report.add(base);
      }
      report.add(row);
    }
  }
  return 0;
}

}  // namespace
}  // namespace rmsg::perf

int main(int argc, char** argv) {
  rmsg::perf::Options options;
  std::string error;
  if (!rmsg::perf::parse_options(argc, argv, options, error)) {
    std::fprintf(stderr, "rmsg-perf: %s\n", error.c_str());
    rmsg::perf::print_usage(stderr);
    return 2;
  }
  if (options.help) {
    rmsg::perf::print_usage(stdout);
    return 0;
  }
  return rmsg::perf::run(options);
}
