// ConnectionManagerOptions::max_connections over real loopback TCP: connects over the
// limit fail at once, accepts over it are closed, a lingering connection counts until its
// linger ends, and released slots serve again. The other side of each connection is a
// plain tcp_listen / tcp_connect on the same loop thread, so only one manager counts.
#include <gtest/gtest.h>

#include <deque>
#include <optional>
#include <vector>

#include "kit/loop_fixture.h"
#include "rmsg/connection_manager.h"
#include "tcp/tcp_linger.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

class CmLimitTcp : public LoopTest {
 protected:
  void make_manager(std::size_t max_connections) {
    ConnectionManagerOptions o;
    o.max_connections = max_connections;
    auto m = ConnectionManager::create(loop(), o);
    ASSERT_TRUE(m.ok()) << m.error().message();
    manager_ = std::move(m).value();
    params_.transport = Transport::tcp;
  }
  // A plain listener (not the manager's): what it accepts lands in accepted_.
  void plain_listen(TcpOptions o = {}) {
    auto l = tcp_listen(loop(), SocketAddress::parse("127.0.0.1:0").value(), o,
                        [this](Stream s) { accepted_.push_back(std::move(s)); });
    ASSERT_TRUE(l.ok()) << l.error().message();
    listener_ = std::move(l).value();
    params_.peer = SocketAddress::parse("127.0.0.1:" + std::to_string(listener_.port())).value();
  }
  // Starts a managed connect; its result lands in results_[index].
  std::size_t connect() {
    const std::size_t index = results_.size();
    results_.emplace_back();
    manager_->connect(params_,
                      [this, index](Result<Stream> r) { results_[index].emplace(std::move(r)); });
    return index;
  }
  bool delivered(std::size_t index) {
    return loop().run_for([&] { return results_[index].has_value(); }, 10s);
  }
  void TearDown() override {
    results_.clear();
    accepted_.clear();
    manager_.reset();
  }

  std::unique_ptr<ConnectionManager> manager_;
  ConnectionParams params_;
  Listener listener_;
  std::deque<Stream> accepted_;
  std::deque<std::optional<Result<Stream>>> results_;
};

TEST_F(CmLimitTcp, ConnectsOverTheLimitFailAtOnceAndFreedSlotsServeAgain) {
  ASSERT_NO_FATAL_FAILURE(make_manager(3));
  ASSERT_NO_FATAL_FAILURE(plain_listen());
  // Pending connects count: the fourth is refused before any of the three completed.
  for (int i = 0; i < 4; ++i) connect();
  EXPECT_EQ(manager_->connections(), 3u);
  EXPECT_FALSE(results_[3].has_value()) << "the callback ran inside connect()";
  ASSERT_TRUE(delivered(3));
  ASSERT_FALSE(results_[3]->ok());
  EXPECT_EQ(results_[3]->error(), make_error_code(ConnectErrc::connection_limit));
  EXPECT_TRUE(results_[3]->error() == std::errc::resource_unavailable_try_again);
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(delivered(i));
    ASSERT_TRUE(results_[i]->ok()) << results_[i]->error().message();
  }
  EXPECT_EQ(manager_->connections(), 3u);
  EXPECT_EQ(manager_->counters().value("limit.connects_refused"), 1u);
  EXPECT_EQ(manager_->counters().value("connects.failed.connection_limit"), 1u);
  EXPECT_EQ(manager_->counters().value("connects.ok"), 3u);
  // Established connections count; one more is refused.
  const std::size_t again = connect();
  ASSERT_TRUE(delivered(again));
  EXPECT_EQ(results_[again]->error(), make_error_code(ConnectErrc::connection_limit));
  // An abortive close releases the slot at once (the handle may stay around).
  results_[0]->value().close();
  EXPECT_EQ(manager_->connections(), 2u);
  const std::size_t freed = connect();
  ASSERT_TRUE(delivered(freed));
  ASSERT_TRUE(results_[freed]->ok()) << results_[freed]->error().message();
  EXPECT_EQ(manager_->connections(), 3u);
  // Dropping a handle releases too.
  results_[1].reset();
  EXPECT_EQ(manager_->connections(), 2u);
  // A failed connect gives its slot back.
  listener_ = Listener();
  const std::size_t refused = connect();
  ASSERT_TRUE(delivered(refused));
  EXPECT_TRUE(results_[refused]->is(Errc::connection_refused))
      << (results_[refused]->ok() ? "connected" : results_[refused]->error().message());
  EXPECT_EQ(manager_->connections(), 2u);
  EXPECT_EQ(manager_->counters().value("limit.connects_refused"), 2u);
}

// close() after shutdown_write() lingers until the peer's EOF: it still counts, and the
// slot comes back when the linger ends - by the peer's EOF, or by the linger timeout.
TEST_F(CmLimitTcp, LingeringConnectionCountsUntilItsLingerEnds) {
  ASSERT_NO_FATAL_FAILURE(make_manager(1));
  ASSERT_NO_FATAL_FAILURE(plain_listen());
  params_.tcp.linger_timeout = 300ms;
  const std::size_t first = connect();
  ASSERT_TRUE(delivered(first));
  ASSERT_TRUE(results_[first]->ok()) << results_[first]->error().message();
  ASSERT_TRUE(loop().run_for([&] { return !accepted_.empty(); }, 10s));
  Stream peer = std::move(accepted_.front());
  accepted_.pop_front();

  ASSERT_TRUE(results_[first]->value().shutdown_write().ok());
  results_[first].reset();  // close(): lingers, the loop owns the socket
  EXPECT_EQ(tcp::lingering(loop()), 1u);
  EXPECT_EQ(manager_->connections(), 1u);
  const std::size_t during = connect();
  ASSERT_TRUE(delivered(during));
  EXPECT_EQ(results_[during]->error(), make_error_code(ConnectErrc::connection_limit));

  // The peer reads our EOF and closes its side: the linger ends, the slot is free.
  ASSERT_TRUE(loop().run_for(
      [&] {
        char buf[64];
        auto r = peer.read(buf, sizeof buf);
        return r && r.value() == 0;
      },
      10s));
  ASSERT_TRUE(peer.shutdown_write().ok());
  ASSERT_TRUE(loop().run_for([&] { return manager_->connections() == 0; }, 10s))
      << "the linger never ended";
  EXPECT_EQ(tcp::lingering(loop()), 0u);
  peer = Stream();

  // Again, with a peer that never closes: the linger timeout ends it.
  const std::size_t second = connect();
  ASSERT_TRUE(delivered(second));
  ASSERT_TRUE(results_[second]->ok()) << results_[second]->error().message();
  ASSERT_TRUE(loop().run_for([&] { return !accepted_.empty(); }, 10s));
  ASSERT_TRUE(results_[second]->value().shutdown_write().ok());
  results_[second].reset();
  EXPECT_EQ(manager_->connections(), 1u);
  const auto t0 = Clock::now();
  ASSERT_TRUE(loop().run_for([&] { return manager_->connections() == 0; }, 10s));
  EXPECT_GE(Clock::now() - t0, 250ms) << "released before the linger timeout";
  const std::size_t after = connect();
  ASSERT_TRUE(delivered(after));
  EXPECT_TRUE(results_[after]->ok()) << results_[after]->error().message();
}

TEST_F(CmLimitTcp, AcceptsOverTheLimitAreClosedAndCounted) {
  ASSERT_NO_FATAL_FAILURE(make_manager(2));
  std::vector<Stream> served;
  auto l = manager_->listen(SocketAddress::parse("127.0.0.1:0").value(), params_,
                            [&](Stream s) { served.push_back(std::move(s)); });
  ASSERT_TRUE(l.ok()) << l.error().message();
  const auto peer = SocketAddress::parse("127.0.0.1:" + std::to_string(l->port())).value();
  // Three plain clients; each reads, so the rejected one sees its reset.
  struct Client {
    Stream stream;
    std::error_code error;
  };
  std::deque<Client> clients;
  const auto start = [&] {
    clients.emplace_back();
    Client* c = &clients.back();
    tcp_connect(loop(), peer, {}, [c](Result<Stream> r) {
      if (!r) {
        c->error = r.error();
        return;
      }
      c->stream = std::move(r).value();
      c->stream.on_readable([c] {
        char buf[64];
        auto n = c->stream.read(buf, sizeof buf);
        if (!n && !n.is(Errc::would_block)) c->error = n.error();
        if (n && n.value() == 0) c->error = make_error_code(Errc::peer_closed);
      });
    });
  };
  for (int i = 0; i < 3; ++i) start();
  ASSERT_TRUE(loop().run_for(
      [&] { return manager_->counters().value("limit.accepts_rejected") == 1; }, 10s));
  ASSERT_TRUE(loop().run_for(
      [&] {
        int failed = 0;
        for (const auto& c : clients) failed += c.error ? 1 : 0;
        return failed == 1;
      },
      10s))
      << "the rejected client never learned of it";
  EXPECT_EQ(served.size(), 2u);
  EXPECT_EQ(manager_->connections(), 2u);
  for (const auto& c : clients) {
    if (c.error) {
      EXPECT_EQ(c.error, make_error_code(Errc::connection_reset)) << c.error.message();
    }
  }
  // A served connection goes: the next client is accepted.
  served.front().close();
  EXPECT_EQ(manager_->connections(), 1u);
  start();
  ASSERT_TRUE(loop().run_for([&] { return served.size() == 3; }, 10s));
  EXPECT_EQ(manager_->connections(), 2u);
  EXPECT_EQ(manager_->counters().value("limit.accepts_rejected"), 1u);
}

}  // namespace
}  // namespace rmsg::testing
