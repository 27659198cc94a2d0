// RPC over RDMA in the Soft-RoCE guest with a server endpoint that owns a messenger over
// two loops: 8 clients only connect in, so each connect request is routed to the loop
// that owns the client's session, and each request must be handled there; calls come
// from threads that are no loop's. retry_count 6: rxe retries for ever at 7.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rmsg/loop_threads.h"
#include "rmsg/rpc.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

constexpr NodeId kServer = 1;
constexpr int kClients = 8;
constexpr int kEach = 40;  // calls per client

ConnectionParams rdma_to(const std::string& address) {
  ConnectionParams p;
  p.transport = Transport::rdma;
  p.peer = SocketAddress::parse(address).value();
  p.rdma.retry_count = 6;
  p.rdma.rnr_retry_count = 0;
  return p;
}

std::vector<std::byte> body_of(int client, int i) {
  const std::string s = std::to_string(client) + "/" + std::to_string(i);
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

TEST(RpcRdmaLoops, RequestsAreHandledOnTheLoopThatOwnsTheCaller) {
  const char* host = std::getenv("RMSG_RDMA_ADDR");
  ASSERT_NE(host, nullptr) << "RMSG_RDMA_ADDR is not set: run in the Soft-RoCE guest";
  auto server_loops = LoopThreads::create(2).value();
  auto client_loops = LoopThreads::create(2).value();
  RpcOptions so;
  so.messenger.node_id = kServer;
  auto server = RpcEndpoint::create(server_loops->loops(), so).value();
  std::atomic<int> wrong_thread{0};
  std::atomic<int> served{0};
  server->handle(1, [&](const RpcRequest& req, RpcResponder reply) {
    if (!server->messenger().loop_of(req.from).in_loop_thread()) ++wrong_thread;
    ++served;
    reply.ok(req.body);
  });
  // Before the loops run: listen registers loop 1's manager as a routing target.
  const auto any = SocketAddress::from_host_port(host, 0).value();
  const std::string addr =
      server->messenger().listen(any, rdma_to(std::string(host) + ":1")).value();
  std::vector<std::unique_ptr<RpcEndpoint>> clients;
  std::size_t owners[2] = {0, 0};
  for (int i = 0; i < kClients; ++i) {
    RpcOptions co;
    co.messenger.node_id = 2 + static_cast<NodeId>(i);
    auto c = RpcEndpoint::create(client_loops->loop(static_cast<std::size_t>(i) % 2), co).value();
    ASSERT_TRUE(c->messenger().add_peer(kServer, rdma_to(addr)).ok());
    clients.push_back(std::move(c));
    owners[&server->messenger().loop_of(2 + static_cast<NodeId>(i)) == &server_loops->loop(0)
               ? 0
               : 1]++;
  }
  ASSERT_GT(owners[0], 0u);
  ASSERT_GT(owners[1], 0u);
  server_loops->start();
  client_loops->start();

  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < kEach; ++n) {
        auto b = body_of(i, n);
        auto id = clients[static_cast<std::size_t>(i)]->call(
            kServer, 1, b, {.deadline = Clock::now() + 60s}, [&, b](RpcResponse r) {
              if (r.error || r.body != b) ++wrong;
              const std::lock_guard lock(mu);
              ++done;
              cv.notify_all();
            });
        if (!id) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return done == kClients * kEach; })) << done;
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(wrong_thread.load(), 0);
  EXPECT_EQ(served.load(), kClients * kEach);
  EXPECT_EQ(server->messenger().counter_total("msg.sessions"),
            static_cast<std::uint64_t>(kClients));
  EXPECT_EQ(server->messenger().counter_total("msg.resets"), 0u);
  server.reset();  // while the loops run
  clients.clear();
}

}  // namespace
}  // namespace rmsg::testing
