// The key-value example's server: an RpcEndpoint over several loop threads, a handler that
// any of them may run at once (the store takes a shared_mutex), Put registered with dedupe
// so a client's retry is answered once, and a graceful shutdown on SIGTERM or SIGINT.
//   kv_server [--listen 127.0.0.1:0] [--loops 2] [--node 1]
// Prints "kv_server: listening on ADDR" once it accepts, "kv_server: stopped" at the end.
#include <rmsg/loop_threads.h>
#include <rmsg/rpc.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "kv_codec.h"

namespace {

class Store {
 public:
  void put(std::string key, std::string value) {
    const std::unique_lock lock(mutex_);
    map_[std::move(key)] = std::move(value);
  }
  kv::GetReply get(const std::string& key) const {
    const std::shared_lock lock(mutex_);
    auto it = map_.find(key);
    return it == map_.end() ? kv::GetReply{} : kv::GetReply{true, it->second};
  }
  std::size_t size() const {
    const std::shared_lock lock(mutex_);
    return map_.size();
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::string> map_;
};

int fail(const char* what, const std::error_code& e) {
  std::fprintf(stderr, "kv_server: %s: %s\n", what, e.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  std::size_t loops = 2;
  rmsg::NodeId node = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--listen")
      listen = argv[i + 1];
    else if (arg == "--loops")
      loops = std::strtoul(argv[i + 1], nullptr, 10);
    else if (arg == "--node")
      node = std::strtoull(argv[i + 1], nullptr, 10);
  }
  // Signals are taken by sigwait() below: blocked here, so every loop thread inherits it.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto threads = rmsg::LoopThreads::create(loops);
  if (!threads) return fail("loops", threads.error());
  auto address = rmsg::SocketAddress::parse(listen);
  if (!address) return fail("--listen", address.error());
  rmsg::RpcOptions options;
  options.messenger.node_id = node;
  auto endpoint = rmsg::RpcEndpoint::create((*threads)->loops(), options);
  if (!endpoint) return fail("endpoint", endpoint.error());
  auto& rpc = **endpoint;

  Store store;
  // Handlers run on the loop of the calling peer's session, several at once.
  rpc.handle(
      kv::kPut,
      [&store](const rmsg::RpcRequest& request, rmsg::RpcResponder reply) {
        auto put = kv::decode<kv::PutRequest>(request.body);
        if (!put) return reply.error(kv::kMalformed);
        store.put(std::move(put->key), std::move(put->value));
        reply.ok();
      },
      rmsg::MethodOptions{.dedupe = true});
  rpc.handle(kv::kGet, [&store](const rmsg::RpcRequest& request, rmsg::RpcResponder reply) {
    auto get = kv::decode<kv::GetRequest>(request.body);
    if (!get) return reply.error(kv::kMalformed);
    reply.ok(kv::encode(store.get(get->key)));
  });

  rmsg::ConnectionParams params;
  params.transport = rmsg::Transport::tcp;
  auto bound = rpc.messenger().listen(*address, params);  // before the loops run
  if (!bound) return fail("listen", bound.error());
  (*threads)->start();
  std::printf("kv_server: listening on %s\n", bound->c_str());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  // Refuse new calls, let those in handlers answer, drain the replies: at most 2 s.
  std::promise<void> drained;
  rpc.shutdown((*threads)->loop(0).now() + std::chrono::seconds(2),
               [&drained] { drained.set_value(); });
  drained.get_future().wait();
  endpoint->reset();  // while the loops run: it closes each shard on its loop
  (*threads)->stop();
  std::printf("kv_server: stopped (signal %d), %zu keys\n", signal, store.size());
  return 0;
}
