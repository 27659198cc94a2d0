// The connection manager over real loopback TCP: the same API as RDMA, nothing pooled.
// Client and server run on one loop thread.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "kit/loop_fixture.h"
#include "rmsg/connection_manager.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class CmTcp : public LoopTest {
 protected:
  void SetUp() override {
    LoopTest::SetUp();
    auto m = ConnectionManager::create(loop());
    ASSERT_TRUE(m.ok()) << m.error().message();
    manager_ = std::move(m).value();
    params_.transport = Transport::tcp;
  }
  void TearDown() override {
    accepted_.clear();
    manager_.reset();
  }
  void listen() {
    auto l = manager_->listen(SocketAddress::parse("127.0.0.1:0").value(), params_,
                              [this](Stream s) { accepted_.push_back(std::move(s)); });
    ASSERT_TRUE(l.ok()) << l.error().message();
    listener_ = std::move(l).value();
    params_.peer = SocketAddress::parse("127.0.0.1:" + std::to_string(listener_.port())).value();
  }

  std::unique_ptr<ConnectionManager> manager_;
  ConnectionParams params_;
  Listener listener_;
  std::deque<Stream> accepted_;
};

// Sends `out` and reads until `in_size` bytes arrived, driving the loop.
bool exchange(EventLoop& loop, Stream& a, Stream& b, const std::string& msg) {
  std::size_t sent = 0;
  std::string got;
  return loop.run_for(
      [&] {
        if (sent < msg.size()) {
          auto w = a.write(msg.data() + sent, msg.size() - sent);
          if (w) sent += w.value();
        }
        char buf[4096];
        auto r = b.read(buf, sizeof buf);
        if (r && r.value() > 0) got.append(buf, r.value());
        return got == msg;
      },
      10s);
}

TEST_F(CmTcp, ConnectsAndAcceptsOnOneThread) {
  ASSERT_NO_FATAL_FAILURE(listen());
  std::optional<Result<Stream>> client;
  ConnectReport report;
  manager_->connect(params_, [&](Result<Stream> r, const ConnectReport& rep) {
    client.emplace(std::move(r));
    report = rep;
  });
  EXPECT_FALSE(client.has_value()) << "the callback ran inside connect()";
  EXPECT_EQ(manager_->pending(), 1u);
  ASSERT_TRUE(loop().run_for([&] { return client && !accepted_.empty(); }, 10s));
  ASSERT_TRUE(client->ok()) << client->error().message();
  Stream c = std::move(*client).value();
  EXPECT_STREQ(c.transport(), "tcp");
  EXPECT_EQ(report.transport, Transport::tcp);
  EXPECT_FALSE(report.reused);
  EXPECT_GT(report.total.count(), 0);
  EXPECT_EQ(manager_->pending(), 0u);
  EXPECT_TRUE(exchange(loop(), c, accepted_.front(), "ping from the client"));
  EXPECT_TRUE(exchange(loop(), accepted_.front(), c, "pong from the server"));
  EXPECT_EQ(manager_->counters().value("connects.ok"), 1u);
  EXPECT_EQ(manager_->counters().value("latency.tcp.fresh.count"), 1u);
  EXPECT_EQ(manager_->counters().value("structures.created"), 0u) << "TCP pools nothing";
}

TEST_F(CmTcp, NoListenerIsRefusedPromptly) {
  ASSERT_NO_FATAL_FAILURE(listen());
  listener_.close();
  std::optional<Result<Stream>> r;
  const auto start = Clock::now();
  manager_->connect(params_, [&](Result<Stream> s) { r.emplace(std::move(s)); });
  ASSERT_TRUE(loop().run_for([&] { return r.has_value(); }, 10s));
  EXPECT_TRUE(r->is(Errc::connection_refused)) << (r->ok() ? "connected" : r->error().message());
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(manager_->counters().value("connects.failed.refused"), 1u);
}

// A listener whose accept queue is full (backlog 0, never accepting) drops further SYNs:
// those connects can only end by the handshake deadline.
TEST_F(CmTcp, UnansweredHandshakeTimesOutAsHandshakeStep) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), len), 0);
  ASSERT_EQ(::listen(fd, 0), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  params_.peer = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&sa), len);
  params_.tcp.connect_timeout = 300ms;
  constexpr int kConnects = 6;
  std::vector<std::optional<Result<Stream>>> results(kConnects);
  for (auto& slot : results) {
    manager_->connect(params_, [&slot](Result<Stream> s) { slot.emplace(std::move(s)); });
  }
  const auto start = Clock::now();
  ASSERT_TRUE(loop().run_for(
      [&] {
        for (auto& s : results) {
          if (!s) return false;
        }
        return true;
      },
      10s));
  int timeouts = 0;
  for (auto& s : results) {
    if (s->ok()) continue;
    EXPECT_EQ(s->error(), make_error_code(ConnectErrc::handshake_timeout)) << s->error().message();
    EXPECT_TRUE(s->error() == std::errc::timed_out);
    ++timeouts;
  }
  EXPECT_GE(timeouts, 1) << "the full backlog accepted every connect";
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_EQ(manager_->counters().value("connects.failed.handshake_timeout"),
            static_cast<std::uint64_t>(timeouts));
  results.clear();
  ::close(fd);
}

TEST_F(CmTcp, ConcurrentConnectsToOnePeer) {
  ASSERT_NO_FATAL_FAILURE(listen());
  constexpr int kConnects = 32;
  std::vector<Stream> clients;
  int failures = 0;
  for (int i = 0; i < kConnects; ++i) {
    manager_->connect(params_, [&](Result<Stream> r) {
      if (r) {
        clients.push_back(std::move(r).value());
      } else {
        ++failures;
      }
    });
  }
  ASSERT_TRUE(loop().run_for(
      [&] {
        return static_cast<int>(clients.size()) + failures == kConnects &&
               accepted_.size() == clients.size();
      },
      20s));
  ASSERT_EQ(failures, 0);
  // Each client's message arrives at exactly one accepted stream, intact.
  for (int i = 0; i < kConnects; ++i) {
    const std::string msg = "client " + std::to_string(i);
    ASSERT_TRUE(clients[i].write(msg.data(), msg.size()).ok());
  }
  std::vector<std::string> got(accepted_.size());
  ASSERT_TRUE(loop().run_for(
      [&] {
        std::size_t complete = 0;
        for (std::size_t i = 0; i < accepted_.size(); ++i) {
          char buf[64];
          auto r = accepted_[i].read(buf, sizeof buf);
          if (r && r.value() > 0) got[i].append(buf, r.value());
          complete += got[i].starts_with("client ") && got[i].size() >= 8;
        }
        return complete == accepted_.size();
      },
      10s));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end()) << "a message arrived twice";
  EXPECT_EQ(manager_->counters().value("connects.ok"), static_cast<std::uint64_t>(kConnects));
}

TEST_F(CmTcp, TwoHundredConnectionsSetUpAndTornDownOnOneThread) {
  ASSERT_NO_FATAL_FAILURE(listen());
  constexpr int kTotal = 200;
  constexpr int kAtOnce = 10;
  const auto start = Clock::now();
  int done = 0;
  for (int round = 0; round < kTotal / kAtOnce; ++round) {
    std::vector<Stream> clients;
    for (int i = 0; i < kAtOnce; ++i) {
      manager_->connect(params_, [&](Result<Stream> r) {
        ASSERT_TRUE(r.ok()) << r.error().message();
        clients.push_back(std::move(r).value());
      });
    }
    ASSERT_TRUE(loop().run_for(
        [&] { return clients.size() == kAtOnce && accepted_.size() == kAtOnce; }, 20s));
    for (auto& c : clients) {
      ASSERT_TRUE(exchange(loop(), c, accepted_.front(), "hello " + std::to_string(done++)));
      c.close();
      accepted_.pop_front();
    }
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  std::printf("[ time ] %d TCP connections set up, used and torn down in %lld ms\n", kTotal,
              static_cast<long long>(took.count()));
  EXPECT_EQ(manager_->counters().value("connects.ok"), static_cast<std::uint64_t>(kTotal));
  EXPECT_EQ(manager_->pending(), 0u);
}

TEST_F(CmTcp, DestroyingTheManagerCancelsPendingConnects) {
  ASSERT_NO_FATAL_FAILURE(listen());
  std::optional<Result<Stream>> r;
  manager_->connect(params_, [&](Result<Stream> s) { r.emplace(std::move(s)); });
  manager_.reset();
  ASSERT_TRUE(loop().run_for([&] { return r.has_value(); }, 10s));
  EXPECT_TRUE(r->is(Errc::cancelled)) << (r->ok() ? "connected" : r->error().message());
}

TEST_F(CmTcp, RdmaParamsOnTcpOnlyBuildsOrDeviceErrorsAreValues) {
  // Asking for RDMA never throws or aborts: without a stack it is a clear error value.
  ConnectionParams p;
  p.transport = Transport::rdma;
  p.peer = SocketAddress::parse("127.0.0.1:1").value();
  std::optional<Result<Stream>> r;
  manager_->connect(p, [&](Result<Stream> s) { r.emplace(std::move(s)); });
  EXPECT_FALSE(r.has_value());
  ASSERT_TRUE(loop().run_for([&] { return r.has_value(); }, 10s));
  EXPECT_FALSE(r->ok());
}

}  // namespace
}  // namespace rmsg::testing
