// The object store (tools/objstore) over real TCP with its server killed (its connections
// reset, its endpoint gone) and restarted on the same port while clients keep calls in
// flight: every call completes - ok, or failed with a reason (session reset, timeout) -
// by its deadline; none hangs; calls succeed again after the restart.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "objstore/store.h"
#include "rpc/rpc_fixture.h"

namespace rmsg::testing {
namespace {

using std::chrono::milliseconds;

class ObjstoreTcpTest : public ::testing::Test {
 protected:
  static constexpr NodeId kServer = 1;

  void SetUp() override {
    EventLoopOptions lo;
    lo.seed = seed_for("loop");
    auto l = EventLoop::create(lo);
    ASSERT_TRUE(l.ok());
    loop_ = std::move(l).value();
  }
  void TearDown() override {
    clients_.clear();
    stop_server();
    loop_->run_for([] { return false; }, milliseconds(20));
  }
  static ConnectionParams tcp() {
    ConnectionParams p;
    p.transport = Transport::tcp;
    return p;
  }
  void start_server(std::uint16_t port) {
    auto streams = std::make_unique<KillableStreams>(*loop_);
    server_streams_ = streams.get();
    auto ep = RpcAccess::create(*loop_, objstore::store_options(kServer), std::move(streams), {});
    ASSERT_TRUE(ep.ok());
    server_ = std::move(ep).value();
    store_ = std::make_unique<objstore::Server>(*server_);
    auto bound = server_->messenger().listen(
        SocketAddress::from_host_port("127.0.0.1", port).value(), tcp());
    ASSERT_TRUE(bound.ok()) << bound.error().message();
    address_ = bound.value();
  }
  // A crash: every connection reset, the process state gone.
  void stop_server() {
    if (server_streams_ != nullptr) server_streams_->kill_all();
    store_.reset();
    server_.reset();
    server_streams_ = nullptr;
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<RpcEndpoint> server_;
  std::unique_ptr<objstore::Server> store_;
  KillableStreams* server_streams_ = nullptr;
  std::string address_;
  std::vector<std::unique_ptr<RpcEndpoint>> clients_;
};

TEST_F(ObjstoreTcpTest, ServerKilledAndRestartedNoCallHangs) {
  start_server(0);
  const std::uint16_t port = SocketAddress::parse(address_).value().port();
  ConnectionParams p = tcp();
  p.peer = SocketAddress::parse(address_).value();
  for (NodeId n = 100; n < 104; ++n) {
    auto ep = RpcAccess::create(*loop_, objstore::store_options(n),
                                std::make_unique<KillableStreams>(*loop_), {});
    ASSERT_TRUE(ep.ok());
    ASSERT_TRUE(ep.value()->messenger().add_peer(kServer, p).ok());
    clients_.push_back(std::move(ep).value());
  }
  constexpr auto kTimeout = milliseconds(500);
  const std::vector<std::byte> value(1024, std::byte{'v'});
  std::uint64_t issued = 0, done = 0, ok = 0, ok_after_restart = 0;
  std::map<std::string, int> failures;
  Duration worst{0};
  bool restarted = false;
  std::function<void(std::size_t)> next = [&](std::size_t ci) {
    if (issued >= 4000) return;
    const std::uint64_t n = issued++;
    std::string key = std::to_string(n % 64);  // not "k" + ...: GCC 12 -O3 -Wrestrict
    key.insert(0, 1, 'k');
    const bool get = n % 2 == 1;
    auto r = clients_[ci]->call(
        kServer, get ? objstore::kGet : objstore::kPut,
        get ? objstore::key_body(key) : objstore::put_body(key, value),
        {.deadline = loop_->now() + kTimeout}, [&, ci, get](RpcResponse resp) {
          ++done;
          worst = std::max(worst, resp.latency);
          const bool not_found = resp.error == make_error_code(RpcErrc::handler_error) &&
                                 resp.app_code == objstore::kNotFound;
          if (!resp.error || (get && not_found)) {
            ++ok;
            ok_after_restart += restarted;
          } else {
            ++failures[resp.error.message()];
          }
          next(ci);
        });
    if (!r) ++done, ++failures["refused: " + r.error().message()];
  };
  for (std::size_t i = 0; i < clients_.size(); ++i) next(i);
  ASSERT_TRUE(loop_->run_for([&] { return done >= 1000; }, std::chrono::seconds(20)));
  stop_server();
  loop_->run_for([] { return false; }, milliseconds(50));
  start_server(port);
  restarted = true;
  ASSERT_TRUE(loop_->run_for([&] { return done >= 4000; }, std::chrono::seconds(30)))
      << "done " << done << " of 4000 issued " << issued;
  for (const auto& [why, count] : failures) {
    std::printf("[ objstore ] failed %d: %s\n", count, why.c_str());
    // A deadline that came while the server was down says why it was not reached.
    EXPECT_TRUE(why == make_error_code(RpcErrc::session_reset).message() ||
                why == make_error_code(RpcErrc::timeout).message() ||
                why == make_error_code(Errc::connection_refused).message())
        << why;
  }
  std::printf("[ objstore ] %llu ok (%llu after the restart), worst latency %.1f ms\n",
              static_cast<unsigned long long>(ok),
              static_cast<unsigned long long>(ok_after_restart),
              std::chrono::duration<double, std::milli>(worst).count());
  EXPECT_EQ(done, 4000u);
  EXPECT_GE(ok_after_restart, 2000u);
  // Completed by the deadline (the timer's own slack aside): nothing waited past it.
  EXPECT_LE(worst, kTimeout + milliseconds(100));
  EXPECT_FALSE(failures.empty());  // the crash was seen by someone
}

// A client that restarts numbers its calls from 1 again; its put must be stored, not
// answered from the dedupe table with the reply to its predecessor's put of the same id
// (review #2). The server forgot the client in between (mark_down, as after a failure), so
// the restart is not seen as one.
TEST_F(ObjstoreTcpTest, APutAfterAClientRestartIsStored) {
  start_server(0);
  ConnectionParams p = tcp();
  p.peer = SocketAddress::parse(address_).value();
  constexpr NodeId kClient = 100;
  const auto call = [&](std::uint32_t method, std::vector<std::byte> body) {
    std::optional<RpcResponse> got;
    auto id = clients_.back()->call(kServer, method, body,
                                    {.deadline = loop_->now() + std::chrono::seconds(10)},
                                    [&](RpcResponse r) { got = std::move(r); });
    EXPECT_TRUE(id.ok());
    EXPECT_TRUE(loop_->run_for([&] { return got.has_value(); }, std::chrono::seconds(20)));
    return got.value_or(RpcResponse{});
  };
  const auto value = [](const std::string& s) { return objstore::key_body(s); };
  for (const std::string v : {"first", "second"}) {
    auto ep = RpcAccess::create(*loop_, objstore::store_options(kClient),
                                std::make_unique<KillableStreams>(*loop_), {});
    ASSERT_TRUE(ep.ok());
    ASSERT_TRUE(ep.value()->messenger().add_peer(kServer, p).ok());
    clients_.push_back(std::move(ep).value());
    const RpcResponse put = call(objstore::kPut, objstore::put_body("k", value(v)));
    EXPECT_FALSE(put.error) << put.error.message();
    const RpcResponse got = call(objstore::kGet, objstore::key_body("k"));
    EXPECT_FALSE(got.error) << got.error.message();
    EXPECT_EQ(objstore::to_string(got.body), v);
    clients_.clear();  // the client process ends
    server_->messenger().mark_down(kClient);
  }
}

}  // namespace
}  // namespace rmsg::testing
