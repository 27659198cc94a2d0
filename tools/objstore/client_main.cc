// rmsg-objstore [--connect HOST:PORT] [--transport tcp|rdma] [--timeout MS] COMMAND
//   put KEY VALUE | put KEY --size N | get KEY | del KEY | list [PREFIX]
//   bench [--clients N] [--size BYTES] [--ops N] [--get-percent P] [--node-base N]
// Every call has a deadline (--timeout, default 2000 ms): a call completes or fails with
// its reason (timeout, session reset, not found...), never hangs. Exit status: 0 ok, 1 the
// call failed, 2 usage (--help: the usage, status 0).
//
// Node ids: a one-shot command draws a random one; bench's clients are --node-base + i,
// the base random unless given, so that two benches at once do not share node ids (a
// shared id looks like a restart to the server and resets the other's session).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "args.h"
#include "rmsg/rpc.h"
#include "store.h"

namespace {

using namespace rmsg;
using SteadyClock = std::chrono::steady_clock;

struct Args {
  std::string connect = "127.0.0.1:7400";
  std::string transport = "tcp";
  std::chrono::milliseconds timeout{2000};
  std::vector<std::string> words;
  std::size_t clients = 4, size = 4096, ops = 10000, get_percent = 50;
  std::optional<NodeId> node_base;
  SocketAddress peer;
};

constexpr const char* kUsage =
    "usage: rmsg-objstore [--connect HOST:PORT] [--transport tcp|rdma] [--timeout MS] COMMAND\n"
    "  COMMAND: put KEY VALUE | put KEY --size N | get KEY | del KEY | list [PREFIX]\n"
    "           bench [--clients N] [--size BYTES] [--ops N] [--get-percent P] [--node-base N]\n"
    "  --connect  the server's numeric address (default 127.0.0.1:7400)\n"
    "  --timeout  each call's deadline in ms (default 2000)\n"
    "Exit status: 0 ok, 1 the call failed, 2 usage.\n";

int usage() {
  std::fputs(kUsage, stderr);
  return 2;
}

struct Client {
  std::unique_ptr<RpcEndpoint> ep;
};

Result<Client> make_client(EventLoop& loop, const Args& a, NodeId node) {
  auto ep = RpcEndpoint::create(loop, objstore::store_options(node));
  if (!ep) return ep.error();
  ConnectionParams p;
  p.transport = a.transport == "rdma" ? Transport::rdma : Transport::tcp;
  p.peer = a.peer;
  RMSG_TRY((*ep)->messenger().add_peer(1, p));
  return Client{std::move(ep).value()};
}

// One call, waited for; prints the failure.
std::optional<RpcResponse> call_once(EventLoop& loop, Client& c, const Args& a,
                                     std::uint32_t method, std::span<const std::byte> body) {
  std::optional<RpcResponse> got;
  auto id = c.ep->call(1, method, body, {.deadline = loop.now() + a.timeout},
                       [&](RpcResponse r) { got = std::move(r); });
  if (!id) {
    std::fprintf(stderr, "objstore: %s\n", id.error().message().c_str());
    return std::nullopt;
  }
  (void)loop.run_until([&] { return got.has_value(); }, Clock::time_point::max());
  return got;
}

int single(EventLoop& loop, const Args& a) {
  auto c = make_client(loop, a, 1000 + static_cast<NodeId>(loop.random().next() % 1000000));
  if (!c) return std::fprintf(stderr, "objstore: %s\n", c.error().message().c_str()), 1;
  const auto& w = a.words;
  std::uint32_t method = 0;
  std::vector<std::byte> body;
  if (w[0] == "put" && w.size() == 3) {
    method = objstore::kPut;
    body = objstore::put_body(w[1], objstore::key_body(w[2]));
  } else if (w[0] == "put" && w.size() == 4 && w[2] == "--size") {
    const auto n = objstore::parse_number("--size", w[3], 0, objstore::kMaxValue);
    if (!n) return 2;
    method = objstore::kPut;
    body = objstore::put_body(w[1], std::vector<std::byte>(*n, std::byte{'x'}));
  } else if ((w[0] == "get" || w[0] == "del") && w.size() == 2) {
    method = w[0] == "get" ? objstore::kGet : objstore::kDel;
    body = objstore::key_body(w[1]);
  } else if (w[0] == "list" && w.size() <= 2) {
    method = objstore::kList;
    body = objstore::key_body(w.size() == 2 ? w[1] : "");
  } else {
    return usage();
  }
  auto r = call_once(loop, c.value(), a, method, body);
  if (!r) return 1;
  if (r->error) {
    const bool not_found =
        r->error == make_error_code(RpcErrc::handler_error) && r->app_code == objstore::kNotFound;
    std::fprintf(stderr, "objstore: %s: %s\n", w[0].c_str(),
                 not_found ? "not found" : r->error.message().c_str());
    return 1;
  }
  if (method == objstore::kGet || method == objstore::kList) {
    std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    if (method == objstore::kGet) std::printf("\n");
  }
  return 0;
}

// N clients (endpoints), one call in flight each, `ops` calls in all.
int bench(EventLoop& loop, const Args& a) {
  std::vector<Client> clients;
  const NodeId base = a.node_base.value_or(1'000'000 + loop.random().next() % (NodeId{1} << 40));
  std::printf("objstore bench: clients are nodes %llu to %llu\n",
              static_cast<unsigned long long>(base),
              static_cast<unsigned long long>(base + a.clients - 1));
  for (std::size_t i = 0; i < a.clients; ++i) {
    auto c = make_client(loop, a, base + i);
    if (!c) return std::fprintf(stderr, "objstore: %s\n", c.error().message().c_str()), 1;
    clients.push_back(std::move(c).value());
  }
  const std::vector<std::byte> value(a.size, std::byte{'v'});
  std::vector<double> us;
  std::size_t issued = 0, done = 0, failed = 0, misses = 0;
  std::map<std::string, std::size_t> why;
  std::function<void(std::size_t)> next = [&](std::size_t ci) {
    if (issued >= a.ops) return;
    const std::size_t n = issued++;
    const bool get = n % 100 < a.get_percent && n >= 100;
    // A get reads a key some earlier put wrote (the puts' keys cycle through 1000).
    const std::string key = "bench/" + std::to_string((get ? n - 1 - n % 100 : n) % 1000);
    const auto body = get ? objstore::key_body(key) : objstore::put_body(key, value);
    const auto t0 = SteadyClock::now();
    auto id = clients[ci].ep->call(
        1, get ? objstore::kGet : objstore::kPut, body, {.deadline = loop.now() + a.timeout},
        [&, t0, ci](RpcResponse r) {
          ++done;
          const bool miss = r.error == make_error_code(RpcErrc::handler_error) &&
                            r.app_code == objstore::kNotFound;
          misses += miss ? 1 : 0;
          if (r.error && !miss) {
            ++failed;
            ++why[r.error.message()];
          } else {
            us.push_back(
                std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count());
          }
          next(ci);
        });
    if (!id) ++done, ++failed, ++why[id.error().message()];
  };
  const auto t0 = SteadyClock::now();
  for (std::size_t i = 0; i < clients.size(); ++i) next(i);
  (void)loop.run_until([&] { return done >= a.ops; }, Clock::time_point::max());
  const double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  std::sort(us.begin(), us.end());
  auto q = [&](double f) {
    return us.empty() ? 0.0 : us[std::min(us.size() - 1, static_cast<std::size_t>(f * us.size()))];
  };
  std::printf(
      "objstore bench: %zu clients, %zu B values, %zu%% gets: %zu ops in %.2f s = %.0f "
      "ops/s, p50 %.1f us, p99 %.1f us, p99.9 %.1f us, %zu get misses, %zu failed\n",
      a.clients, a.size, a.get_percent, a.ops, secs, static_cast<double>(a.ops) / secs, q(0.5),
      q(0.99), q(0.999), misses, failed);
  for (const auto& [reason, count] : why) std::printf("  failed %zu: %s\n", count, reason.c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  // Options with a value; "--size" is bench's before a command word, put's after "put K".
  const auto number = [](std::string_view opt, std::string_view v, std::uint64_t min,
                         std::uint64_t max, auto& out) {
    const auto n = objstore::parse_number(opt, v, min, max);
    if (n) out = static_cast<std::remove_reference_t<decltype(out)>>(*n);
    return n.has_value();
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view s = argv[i];
    if (s == "--help" || s == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    const bool put_size = s == "--size" && !a.words.empty() && a.words[0] == "put";
    const bool option = s.starts_with("--") && !put_size;
    if (!option) {
      a.words.emplace_back(s);
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "objstore: %s needs a value\n", argv[i]);
      return usage();
    }
    const std::string_view v = argv[++i];
    bool ok = true;
    if (s == "--connect") {
      a.connect = v;
    } else if (s == "--transport") {
      ok = objstore::parse_transport(v);
      a.transport = v;
    } else if (s == "--timeout") {
      std::uint64_t ms = 0;
      ok = number(s, v, 1, 86'400'000, ms);
      a.timeout = std::chrono::milliseconds(ms);
    } else if (s == "--clients") {
      ok = number(s, v, 1, 10'000, a.clients);
    } else if (s == "--size") {
      ok = number(s, v, 0, objstore::kMaxValue, a.size);
    } else if (s == "--ops") {
      ok = number(s, v, 1, UINT64_MAX, a.ops);
    } else if (s == "--get-percent") {
      ok = number(s, v, 0, 100, a.get_percent);
    } else if (s == "--node-base") {
      NodeId base = 0;
      ok = number(s, v, 2, UINT64_MAX - 10'000, base);
      a.node_base = base;
    } else {
      std::fprintf(stderr, "objstore: unknown option '%s'\n", argv[i - 1]);
      return usage();
    }
    if (!ok) return 2;
  }
  if (a.words.empty()) return usage();
  const auto peer = objstore::parse_address("--connect", a.connect);
  if (!peer) return 2;
  a.peer = *peer;
  auto loop = EventLoop::create();
  if (!loop) return 1;
  return a.words[0] == "bench" ? bench(**loop, a) : single(**loop, a);
}
