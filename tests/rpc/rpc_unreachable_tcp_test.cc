// Calls to a peer that cannot be reached say why (refused, no route, no device) instead of
// only "deadline passed"; a messenger told no transport picks TCP at once on a host
// without an RDMA device. Real TCP on the host, through the public API.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "rpc/rpc_fixture.h"

namespace rmsg::testing {
namespace {

using std::chrono::milliseconds;

// A 127.0.0.1 port nothing listens on: bound (so nobody else takes it meanwhile), not
// listening, so a connect is refused.
class ClosedPort {
 public:
  ClosedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~ClosedPort() { ::close(fd_); }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

class RpcUnreachableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EventLoopOptions lo;
    lo.seed = seed_for("loop");
    loop_ = EventLoop::create(lo).value();
    a_ = RpcEndpoint::create(*loop_, rpc_options(1)).value();
  }
  void TearDown() override {
    b_.reset();
    a_.reset();
    loop_->run_for([] { return false; }, milliseconds(5));
  }
  // One call to node 2 with `timeout`; its completion.
  RpcResponse call_once(Duration timeout) {
    std::optional<RpcResponse> got;
    auto id = a_->call(2, 1, bytes_of("ping"), timeout, [&](RpcResponse r) { got = std::move(r); });
    EXPECT_TRUE(id.ok()) << id.error().message();
    EXPECT_TRUE(loop_->run_for([&] { return got.has_value(); }, std::chrono::seconds(30)));
    return got.value_or(RpcResponse{});
  }
  ConnectionParams tcp_to(const std::string& address) {
    ConnectionParams p;
    p.transport = Transport::tcp;
    p.peer = SocketAddress::parse(address).value();
    p.tcp.connect_timeout = milliseconds(200);
    return p;
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<RpcEndpoint> a_;
  std::unique_ptr<RpcEndpoint> b_;
};

TEST_F(RpcUnreachableTest, ClosedPortSaysConnectionRefused) {
  const ClosedPort closed;
  ASSERT_TRUE(a_->messenger().add_peer(2, tcp_to(closed.address())).ok());
  const RpcResponse r = call_once(milliseconds(300));
  EXPECT_EQ(r.error, make_error_code(Errc::connection_refused)) << r.error.message();
  EXPECT_EQ(error_kind(r.error), ErrorKind::unreachable);
  EXPECT_TRUE(is_retryable(r.error));
  EXPECT_EQ(a_->counters().value("rpc.unreachable"), 1u);
  EXPECT_EQ(a_->peer_stats(2)->timeouts, 1u);
}

TEST_F(RpcUnreachableTest, NoRouteSaysUnreachable) {
  // TCP to a multicast group has no route on Linux (ENETUNREACH at once), on any host.
  ASSERT_TRUE(a_->messenger().add_peer(2, tcp_to("224.0.0.1:9")).ok());
  const RpcResponse r = call_once(milliseconds(300));
  EXPECT_EQ(r.error, make_error_code(Errc::unreachable)) << r.error.message();
  EXPECT_EQ(error_kind(r.error), ErrorKind::unreachable);
}

// An RDMA peer nobody can reach at 127.0.0.1 says so, on any machine: without an RDMA
// device the connect fails with ENODEV, with one (the Soft-RoCE guest runs this case too)
// the connect to a port nobody listens on is refused; both are ErrorKind::unreachable,
// never the call's deadline.
TEST_F(RpcUnreachableTest, AnUnreachableRdmaPeerSaysWhy) {
  ConnectionParams p;
  p.transport = Transport::rdma;
  p.peer = SocketAddress::parse("127.0.0.1:9").value();
  ASSERT_TRUE(a_->messenger().add_peer(2, p).ok());
  const RpcResponse r = call_once(milliseconds(300));
  EXPECT_NE(r.error, make_error_code(RpcErrc::timeout)) << r.error.message();
  EXPECT_EQ(error_kind(r.error), ErrorKind::unreachable) << r.error.message();
}

TEST_F(RpcUnreachableTest, AReachablePeersSlowHandlerIsAPlainTimeout) {
  // A peer that was reached: a slow handler is a plain timeout.
  b_ = RpcEndpoint::create(*loop_, rpc_options(2)).value();
  auto bound = b_->messenger().listen(SocketAddress::parse("127.0.0.1:0").value());
  ASSERT_TRUE(bound.ok());
  std::optional<RpcResponder> held;
  b_->handle(1, [&](const RpcRequest&, RpcResponder reply) { held = std::move(reply); });
  ASSERT_TRUE(a_->messenger().add_peer(2, SocketAddress::parse(bound.value()).value()).ok());
  const RpcResponse r = call_once(milliseconds(300));
  EXPECT_EQ(r.error, make_error_code(RpcErrc::timeout)) << r.error.message();
}

// No transport named, no RDMA device (forced, so the same on any machine; the guest's
// MessengerAutoRdmaTest covers a device): TCP at once, no RDMA attempt, and the session
// says which transport it uses.
TEST_F(RpcUnreachableTest, NoTransportNamedPicksTcpAtOnceWithoutADevice) {
  struct NoDevice {
    NoDevice() {
      MessengerAccess::set_device_probe([] { return false; });
    }
    ~NoDevice() { MessengerAccess::set_device_probe(nullptr); }
  } no_device;
  b_ = RpcEndpoint::create(*loop_, rpc_options(2)).value();
  auto bound = b_->messenger().listen(SocketAddress::parse("127.0.0.1:0").value());
  ASSERT_TRUE(bound.ok()) << bound.error().message();
  b_->handle(1, [](const RpcRequest& req, RpcResponder reply) { reply.ok(req.body); });
  ASSERT_TRUE(a_->messenger().add_peer(2, SocketAddress::parse(bound.value()).value()).ok());
  const RpcResponse r = call_once(std::chrono::seconds(20));
  ASSERT_FALSE(r.error) << r.error.message();
  EXPECT_EQ(string_of(r.body), "ping");
  auto info = a_->messenger().session_info(2);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->transport, Transport::tcp);
  // The exact measure of "at once": not one failed connect before TCP.
  EXPECT_EQ(a_->messenger().counter_total("msg.connect_failures"), 0u);
}

}  // namespace
}  // namespace rmsg::testing
