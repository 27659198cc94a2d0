// The key-value example's server: an RpcEndpoint over several loop threads, a handler that
// any of them may run at once (the store takes a shared_mutex), Put registered with dedupe
// so a client's retry is answered once, one-way notes counted, and a graceful shutdown on
// SIGTERM or SIGINT.
//   kv_server [--listen 127.0.0.1:0] [--loops 2]
// Prints "kv_server: listening on ADDR" once it accepts, "kv_server: stopped" at the end.
// No transport named: RDMA where the host has an active device, else TCP.
#include <rmsg/loop_threads.h>
#include <rmsg/rpc.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "kv_codec.h"

namespace {

// Handlers for different peers run at once on different loops: the map takes a lock.
struct Store {
  std::shared_mutex mutex;
  std::unordered_map<std::string, std::string> map;
};

int fail(const char* what, const std::error_code& e) {
  std::fprintf(stderr, "kv_server: %s: %s\n", what, e.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args{{"--listen", "127.0.0.1:0"}, {"--loops", "2"}};
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  const std::string listen = args["--listen"];
  const std::size_t loops = std::stoul(args["--loops"]);
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
  options.messenger.node_id = kv::kServerNode;
  auto endpoint = rmsg::RpcEndpoint::create((*threads)->loops(), options);
  if (!endpoint) return fail("endpoint", endpoint.error());
  auto& rpc = **endpoint;

  Store store;
  // Handlers run on the loop of the calling peer's session, several at once.
  rpc.handle(
      kv::kPut,
      [&store](const rmsg::RpcRequest& request, rmsg::RpcResponder reply) {
        auto put = kv::decode_put(request.body);
        if (!put) return reply.error(kv::kMalformed);
        const std::unique_lock lock(store.mutex);
        store.map[std::move(put->key)] = std::move(put->value);
        reply.ok();
      },
      rmsg::MethodOptions{.dedupe = true});
  rpc.handle(kv::kGet, [&store](const rmsg::RpcRequest& request, rmsg::RpcResponder reply) {
    auto get = kv::decode_get(request.body);
    if (!get) return reply.error(kv::kMalformed);
    const std::shared_lock lock(store.mutex);
    auto it = store.map.find(get->key);
    reply.ok(kv::encode(it == store.map.end() ? kv::GetReply{} : kv::GetReply{true, it->second}));
  });
  std::atomic<std::size_t> notes{0};  // one-way: no reply, delivered once and in order
  rpc.handle_oneway(kv::kNote, [&notes](const rmsg::RpcRequest& request) {
    if (kv::fields(request.body, 1)) ++notes;
  });

  auto bound = rpc.messenger().listen(*address);  // before the loops run
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
  std::printf("kv_server: stopped (signal %d), %zu keys, %zu notes\n", signal, store.map.size(),
              notes.load());
  return 0;
}
