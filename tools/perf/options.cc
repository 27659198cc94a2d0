#include "options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace rmsg::perf {
namespace {

// "64", "4K", "64KiB", "1M", "2G": binary multiples.
bool parse_size(std::string_view text, std::uint64_t& out) {
  std::uint64_t v = 0;
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc{} || p == text.data()) return false;
  std::string_view unit(p, static_cast<std::size_t>(end - p));
  int shift = 0;
  if (!unit.empty()) {
    const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])));
    shift = u == 'K' ? 10 : u == 'M' ? 20 : u == 'G' ? 30 : u == 'B' ? 0 : -1;
    unit.remove_prefix(1);
    if (shift < 0 || !(unit.empty() || unit == "B" || unit == "iB")) return false;
  }
  out = v << shift;
  return out > 0 && out <= (1ull << 30);
}

bool parse_list(std::string_view text, std::vector<std::uint64_t>& out) {
  while (!text.empty()) {
    const auto comma = text.find(',');
    std::uint64_t v = 0;
    if (!parse_size(text.substr(0, comma), v)) return false;
    out.push_back(v);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return !out.empty();
}

// "1,0": the client's CPU, then the servers'.
bool parse_cpus(std::string_view text, Options& o) {
  const auto comma = text.find(',');
  if (comma == std::string_view::npos) return false;
  auto num = [](std::string_view t, int& out) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return ec == std::errc{} && p == t.data() + t.size() && out >= 0 && out < 1024;
  };
  return num(text.substr(0, comma), o.client_cpu) && num(text.substr(comma + 1), o.server_cpu);
}

// "16x32K": the count, then the block size (RdmaOptions checks the ranges).
bool parse_blocks(std::string_view text, Options& o) {
  const auto x = text.find('x');
  if (x == std::string_view::npos) return false;
  std::uint64_t count = 0, size = 0;
  if (!parse_size(text.substr(0, x), count) || !parse_size(text.substr(x + 1), size)) return false;
  if (count > UINT32_MAX || size > UINT32_MAX) return false;
  o.block_count = static_cast<std::uint32_t>(count);
  o.block_size = static_cast<std::uint32_t>(size);
  return true;
}

}  // namespace

void print_usage(std::FILE* out) {
  std::fputs(
      "usage: rmsg-perf [--test lat|bw|connect|rpc|failover|scale] [--transport "
      "tcp|rdma|auto|posix|verbs]\n"
      "                 [--connections N] [--window N] [--setup-calls N]\n"
      "                 [--size N[,N...]] [--iters N] [--repeat N] [--json] [--busy-poll]\n"
      "                 [--poll-spin US]\n"
      "                 [--one-thread] [--counters] [--blocks COUNTxSIZE] [--cpus C,S]\n"
      "                 [--baseline NAME] [--address HOST]\n"
      "                 [--server ADDR:PORT | --connect ADDR:PORT]\n"
      "\n"
      "  --test        lat: ping-pong, reported one-way (half the round trip);\n"
      "                bw: one-way stream. Default: both.\n"
      "                connect: connection setup through the connection manager, fresh\n"
      "                vs reused structures, one loop thread (--transport rdma|tcp)\n"
      "                rpc: Messenger RPC echo calls (--outstanding 1,16,128) and one-way\n"
      "                messages beside the raw stream ping-pong and streaming (rdma|tcp)\n"
      "                failover: RPC echo calls over an rdma_preferred session whose RDMA\n"
      "                connection is failed twice mid-run (seam); TCP carries on, RDMA returns\n"
      "                scale: --connections N (default 100) on one loop thread, at most\n"
      "                --window N (default 16) connects in flight: memory, fds and QPs per\n"
      "                connection at idle, connects/s, loop stalls, RNR, MB/s with all and\n"
      "                with 10 active (--size: bytes per phase, default 64M), bytes checked\n"
      "  --setup-calls rdma: RdmaOptions::max_setup_calls_per_iteration (0: no bound)\n"
      "  --shared-receive  rdma, --test scale: receives from one shared pool per loop\n"
      "  --transport   rmsg transport to measure (default auto: rdma when built and a\n"
      "                device has an active port, else tcp); posix, verbs: that baseline\n"
      "                alone (verbs: SEND/RECV straight on an RC QP)\n"
      "  --size        message sizes, K/M/G suffixes allowed (default lat 64,4K; bw 4K,64K)\n"
      "  --iters       measured messages per size (default: scaled to the size)\n"
      "  --repeat      rounds per size, baseline and transport alternating; the median\n"
      "                round of each is reported with the spread of the rounds' ratios\n"
      "                (default 3); one short unreported round of each runs first\n"
      "  --json        one JSON object per result on stdout\n"
      "  --busy-poll   rmsg loops spin instead of sleeping in epoll (the baseline blocks)\n"
      "  --poll-spin US  rmsg loops poll their CQs for US microseconds after work before\n"
      "                they sleep (EventLoopOptions::poll_spin; 0: off; default 50)\n"
      "  --one-thread  rmsg server and client on one loop thread (default: one thread each)\n"
      "  --blocks      rdma: ring geometry each way, e.g. 16x32K (default: RdmaOptions')\n"
      "  --baseline    runner measured alongside for the ratio column (default: verbs for\n"
      "                rdma, posix otherwise; verbs-window: raw verbs with the stream's\n"
      "                window, --blocks or 8 sends in flight and receives; none)\n"
      "  --cpus        C,S (lat, bw): pin the client thread to CPU C, every server thread\n"
      "                to S (rmsg loops and baselines alike; default: the scheduler's)\n"
      "  --counters    after each result, the transport's counters on stderr (rdma: the\n"
      "                client stream's, then every device's)\n"
      "  --address     host for in-process runs (default 127.0.0.1)\n"
      "  --server      serve the transport at ADDR:PORT and the baseline at PORT+1\n"
      "  --connect     run as the client of a --server at ADDR:PORT\n",
      out);
}

bool parse_options(int argc, char** argv, Options& o, std::string& error) {
  auto bad = [&](std::string message) {
    error = std::move(message);
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= argc) {
        error = std::string(arg) + " needs a value";
        return false;
      }
      dst = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--busy-poll") {
      o.busy_poll = true;
    } else if (arg == "--poll-spin") {
      if (!value(v)) return false;
      char* end = nullptr;
      o.poll_spin_us = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || o.poll_spin_us < 0) {
        return bad("--poll-spin needs microseconds >= 0");
      }
    } else if (arg == "--one-thread") {
      o.one_thread = true;
    } else if (arg == "--counters") {
      o.counters = true;
    } else if (arg == "--test") {
      if (!value(v)) return false;
      if (v == "lat")
        o.tests.push_back(Test::lat);
      else if (v == "bw")
        o.tests.push_back(Test::bw);
      else if (v == "connect")
        o.connect_test = true;
      else if (v == "rpc")
        o.rpc_test = true;
      else if (v == "failover")
        o.failover_test = true;
      else if (v == "scale")
        o.scale_test = true;
      else
        return bad("unknown test '" + v + "' (lat, bw, connect, rpc, failover, scale)");
    } else if (arg == "--transport") {
      if (!value(o.transport)) return false;
    } else if (arg == "--baseline") {
      if (!value(o.baseline)) return false;
    } else if (arg == "--size") {
      if (!value(v)) return false;
      if (!parse_list(v, o.sizes)) return bad("bad --size '" + v + "' (1..1G)");
    } else if (arg == "--outstanding") {
      if (!value(v)) return false;
      if (!parse_list(v, o.outstanding)) return bad("bad --outstanding '" + v + "'");
    } else if (arg == "--iters") {
      if (!value(v)) return false;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), o.iters);
      if (ec != std::errc{} || p != v.data() + v.size() || o.iters == 0) {
        return bad("bad --iters '" + v + "'");
      }
    } else if (arg == "--connections" || arg == "--window") {
      if (!value(v)) return false;
      std::size_t x = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec != std::errc{} || p != v.data() + v.size() || x == 0 || x > 1000000) {
        return bad("bad " + std::string(arg) + " '" + v + "' (1..1000000)");
      }
      (arg == "--connections" ? o.connections : o.window) = x;
    } else if (arg == "--shared-receive") {
      o.shared_receive = true;
    } else if (arg == "--setup-calls") {
      if (!value(v)) return false;
      char* end = nullptr;
      o.setup_calls = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || o.setup_calls < 0 || o.setup_calls > 1000000) {
        return bad("--setup-calls needs a count >= 0 (0: no bound)");
      }
    } else if (arg == "--repeat") {
      if (!value(v)) return false;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), o.repeat);
      if (ec != std::errc{} || p != v.data() + v.size() || o.repeat == 0) {
        return bad("bad --repeat '" + v + "'");
      }
    } else if (arg == "--blocks") {
      if (!value(v)) return false;
      if (!parse_blocks(v, o)) return bad("bad --blocks '" + v + "' (COUNTxSIZE, e.g. 16x32K)");
    } else if (arg == "--cpus") {
      if (!value(v)) return false;
      if (!parse_cpus(v, o)) return bad("bad --cpus '" + v + "' (CLIENT,SERVER, e.g. 1,0)");
    } else if (arg == "--server") {
      if (!value(o.server)) return false;
    } else if (arg == "--connect") {
      if (!value(o.connect)) return false;
    } else if (arg == "--address") {
      if (!value(o.host)) return false;
    } else {
      error = "unknown option '" + std::string(arg) + "'";
      return false;
    }
  }
  if (!o.server.empty() && !o.connect.empty()) {
    error = "--server and --connect exclude each other";
    return false;
  }
  return true;
}

std::vector<std::uint64_t> default_sizes(Test test) {
  if (test == Test::lat) return {64, 4096};
  return {4096, 65536};
}

Spec make_spec(Test test, std::uint64_t size, std::uint64_t iters_option) {
  Spec s;
  s.test = test;
  s.size = size;
  // Defaults keep each run to a fraction of a second on loopback.
  if (iters_option != 0) {
    s.iters = iters_option;
  } else if (test == Test::lat) {
    s.iters = std::clamp<std::uint64_t>((64ull << 20) / size, 20, 5000);
  } else {
    s.iters = std::clamp<std::uint64_t>((256ull << 20) / size, 20, 100000);
  }
  s.warmup = std::min<std::uint64_t>(1000, s.iters / 10);
  return s;
}

}  // namespace rmsg::perf
