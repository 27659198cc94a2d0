// The key-value example's client: puts `--count` keys with values from 64 B to 1 MiB, then
// gets each one back and checks every byte; up to 16 calls outstanding, and a one-way note
// after each put. A call that failed retryably (rmsg::is_retryable: a timeout, a session
// reset, a peer not reached) is retried: a Put with retry_of, so that the server's dedupe
// table answers it if the first attempt ran (kv_server registers Put so).
//   kv_client --server ADDR [--count 100]
// Exit status 0 when every value came back intact.
#include <rmsg/event_loop.h>
#include <rmsg/rpc.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kv_codec.h"

namespace {

constexpr int kDepth = 16;
constexpr int kAttempts = 3;
constexpr std::chrono::seconds kTimeout{5};

std::string value_of(std::size_t i) {
  const std::size_t size = std::size_t{64} << (i % 15);  // 64 B .. 1 MiB
  std::string v(size, '\0');
  for (std::size_t k = 0; k < size; ++k) v[k] = static_cast<char>('a' + (i * 31 + k) % 26);
  return v;
}

struct Client {
  rmsg::EventLoop& loop;
  rmsg::RpcEndpoint& rpc;
  rmsg::NodeId server;
  std::size_t count;
  std::size_t next = 0, finished = 0, failed = 0, retries = 0;
  int outstanding = 0;
  bool getting = false;

  void pump() {
    while (outstanding < kDepth && next < count) start(next++, 1, 0);
  }
  void start(std::size_t i, int attempt, rmsg::CallId retry_of) {
    const std::string key = "key-" + std::to_string(i);
    auto body =
        getting ? kv::encode(kv::GetRequest{key}) : kv::encode(kv::PutRequest{key, value_of(i)});
    rmsg::CallOptions options{.retry_of = getting ? 0 : retry_of, .timeout = kTimeout};
    auto call = rpc.call(server, getting ? kv::kGet : kv::kPut, body, options,
                         [this, i, attempt](rmsg::RpcResponse r) { done(i, attempt, r); });
    if (!call) {
      std::fprintf(stderr, "kv_client: call %zu: %s\n", i, call.error().message().c_str());
      ++failed, ++finished;
      return;
    }
    ++outstanding;
  }
  void done(std::size_t i, int attempt, const rmsg::RpcResponse& r) {
    --outstanding;
    if (r.error && rmsg::is_retryable(r.error) && attempt < kAttempts) {
      ++retries;
      start(i, attempt + 1, r.id);
      return;
    }
    ++finished;
    if (r.error) {
      std::fprintf(stderr, "kv_client: key %zu: %s\n", i, r.error.message().c_str());
      ++failed;
    } else if (!getting) {
      // Refused only when the session's queue is full (the server's count would show it).
      if (!rpc.notify(server, kv::kNote, kv::fields({"put " + std::to_string(i)}))) ++failed;
    } else {
      auto reply = kv::decode_get_reply(r.body);
      if (!reply || !reply->found || reply->value != value_of(i)) {
        std::fprintf(stderr, "kv_client: key %zu: wrong value\n", i);
        ++failed;
      }
    }
    pump();
  }
  bool run_phase(bool get) {
    getting = get;
    next = finished = 0;
    pump();
    return loop.run_for([this] { return finished == count; }, std::chrono::seconds(60));
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args{{"--count", "100"}};
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  const std::size_t count = std::stoul(args["--count"]);
  auto peer = rmsg::SocketAddress::parse(args["--server"]);
  if (!peer) {
    std::fprintf(stderr, "kv_client: --server ADDR:PORT required\n");
    return 2;
  }
  auto loop = rmsg::EventLoop::create();
  auto node = rmsg::generate_node_id();  // unique without configuration
  if (!loop || !node) return 1;
  rmsg::RpcOptions options;
  options.messenger.node_id = *node;
  auto rpc = rmsg::RpcEndpoint::create(**loop, options);
  if (!rpc) {
    std::fprintf(stderr, "kv_client: %s\n", rpc.error().message().c_str());
    return 1;
  }
  if (auto r = (*rpc)->messenger().add_peer(kv::kServerNode, *peer); !r) return 1;  // TCP/RDMA

  Client client{**loop, **rpc, kv::kServerNode, count};
  const bool ok = client.run_phase(false) && client.run_phase(true) && client.failed == 0;
  std::printf("kv_client: %zu puts, %zu notes and %zu gets, %zu failed, %zu retries: %s\n", count,
              count, count, client.failed, client.retries, ok ? "every value intact" : "FAILED");
  return ok ? 0 : 1;
}
