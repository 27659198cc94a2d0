// Routing accepted TCP connections between managers (ConnectionManager::listen with an
// AcceptRouting, accept_routed with TCP params) over real loopback sockets, two loops
// driven by this thread: a connection's first bytes, read by the listener's
// AffinityReader, name the manager that takes it; it arrives there unread, as a Stream of
// that loop, counted by the listener's manager until it is released; what the reader
// rejects, and what is routed to a manager that went, is closed and counted.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <string>

#include "rmsg/connection_manager.h"
#include "rmsg/event_loop.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

// The test's protocol: 8 bytes, little-endian, are the affinity; "REJECT.." is refused.
AffinityRead first_word(std::span<const std::byte> prefix) {
  using V = AffinityRead::Verdict;
  if (prefix.size() < 8) return {V::need_more, 8};
  if (std::memcmp(prefix.data(), "REJECT..", 8) == 0) return {V::reject};
  std::uint64_t a = 0;
  std::memcpy(&a, prefix.data(), 8);
  return {V::route, 0, a};
}

// Whether the server closed `fd` (EOF or reset within 2 s; never blocks for ever).
bool closed_by_server(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 2000) <= 0) return false;
  char x = 0;
  const ssize_t n = ::recv(fd, &x, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN);
}

class CmRouteTcp : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = EventLoop::create().value();
    b_ = EventLoop::create().value();
    ConnectionManagerOptions o;
    o.max_connections = 8;
    ma_ = ConnectionManager::create(*a_, o).value();
    mb_ = ConnectionManager::create(*b_, o).value();
    params_.transport = Transport::tcp;
    auto target = mb_->accept_routed(params_, [this](Stream s) {
      on_b_ = &s.loop() == b_.get();
      at_b_.push_back(std::move(s));
    });
    ASSERT_TRUE(target.ok()) << target.error().message();
    AcceptRouting routing;
    routing.router = [t = target.value()](std::uint64_t affinity) {
      return affinity == 2 ? t : AcceptTarget{};
    };
    routing.read_affinity = first_word;
    routing.max_prefix = 64;
    auto l = ma_->listen(
        SocketAddress::parse("127.0.0.1:0").value(), params_,
        [this](Stream s) { at_a_.push_back(std::move(s)); }, std::move(routing));
    ASSERT_TRUE(l.ok()) << l.error().message();
    listener_ = std::move(l).value();
  }
  void TearDown() override {
    at_a_.clear();
    at_b_.clear();
    listener_ = {};
    mb_.reset();
    ma_.reset();
  }

  // A raw client that sends `bytes` at once.
  int client(const std::string& bytes) {
    const auto addr = SocketAddress::parse("127.0.0.1:" + std::to_string(listener_.port())).value();
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(fd, addr.sockaddr_ptr(), addr.length()), 0);
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
    return fd;
  }
  static std::string word(std::uint64_t affinity) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &affinity, 8);
    return s;
  }
  // Both loops, alternately, until `done` or 5 s.
  bool run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      static_cast<void>(a_->run_once(1ms));
      if (b_) static_cast<void>(b_->run_once(Duration::zero()));
    }
    return true;
  }
  std::uint64_t count(const char* name) const { return ma_->counters().value(name); }

  std::unique_ptr<EventLoop> a_, b_;
  std::unique_ptr<ConnectionManager> ma_, mb_;
  ConnectionParams params_;
  Listener listener_;
  std::deque<Stream> at_a_, at_b_;
  bool on_b_ = false;
};

TEST_F(CmRouteTcp, AConnectionArrivesUnreadOnTheLoopItsFirstBytesNameHoldingItsLease) {
  const int c = client(word(2) + "hello");
  ASSERT_TRUE(run_until([&] { return !at_b_.empty(); }));
  EXPECT_TRUE(on_b_) << "the stream belongs to the target's loop";
  EXPECT_TRUE(at_a_.empty());
  EXPECT_EQ(count("routing.tcp.routed"), 1u);
  EXPECT_EQ(mb_->counters().value("routing.adopted"), 1u);
  EXPECT_EQ(ma_->connections(), 1u) << "the listener's manager counts it, wherever it lives";
  EXPECT_EQ(mb_->connections(), 0u);
  // Every byte from the first, once.
  std::string got;
  ASSERT_TRUE(run_until([&] {
    char buf[64];
    auto n = at_b_.front().read(buf, sizeof buf);
    if (n && n.value() > 0) got.append(buf, n.value());
    return got.size() >= 13;
  }));
  EXPECT_EQ(got, word(2) + "hello");
  at_b_.front().close();  // abortive: released at once, on loop b
  EXPECT_EQ(ma_->connections(), 0u);
  // Affinity 1 routes to no target: the listener's own callback takes it.
  const int own = client(word(1));
  ASSERT_TRUE(run_until([&] { return !at_a_.empty(); }));
  EXPECT_EQ(count("routing.tcp.routed"), 2u);
  ::close(c);
  ::close(own);
}

TEST_F(CmRouteTcp, RejectedAndTargetGoneAreClosedAndCounted) {
  const int bad = client("REJECT..");
  ASSERT_TRUE(run_until([&] { return count("routing.tcp.malformed") == 1; }));
  EXPECT_TRUE(closed_by_server(bad));
  EXPECT_EQ(ma_->connections(), 0u);
  mb_.reset();  // its target closes with it
  const int late = client(word(2));
  ASSERT_TRUE(run_until([&] { return count("routing.tcp.target_gone") == 1; }));
  EXPECT_TRUE(closed_by_server(late));
  EXPECT_EQ(ma_->connections(), 0u);
  EXPECT_TRUE(at_a_.empty());
  ::close(bad);
  ::close(late);
}

// A routed listener kept after its manager went still routes (counting into the
// manager's counters, which it keeps), and its connections count against nothing.
TEST_F(CmRouteTcp, ARoutedListenerOutlivesItsManager) {
  ma_.reset();
  const int c = client(word(1));
  ASSERT_TRUE(run_until([&] { return !at_a_.empty(); }));
  ::close(c);
}

// A hand-off posted to a loop that is destroyed before it runs it: the socket is closed
// and the lease given back with the dropped task (no descriptor leaks).
TEST_F(CmRouteTcp, AHandOffDroppedWithItsLoopClosesTheSocketAndReleasesTheLease) {
  const int c = client(word(2));
  ASSERT_TRUE(a_->run_for([&] { return count("routing.tcp.routed") == 1; }, 5s));
  EXPECT_EQ(ma_->connections(), 1u);
  mb_.reset();
  b_.reset();  // the posted hand-off is dropped unrun
  EXPECT_EQ(ma_->connections(), 0u);
  EXPECT_TRUE(closed_by_server(c));
  ::close(c);
}

}  // namespace
}  // namespace rmsg::testing
