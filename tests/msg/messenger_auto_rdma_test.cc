// listen(address) and add_peer(peer, address) without a transport, in the Soft-RoCE guest
// (a device with an active port): two messengers pick RDMA and carry calls and one-way
// messages over it, every byte checked; a server that listens on TCP only is reached over
// TCP after one refused RDMA connect, never a connect deadline waited out. And a peer
// named for RDMA that cannot be reached says why, as on a host without a device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "kit/rdma_fixture.h"
#include "rpc/rpc_fixture.h"

namespace rmsg::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class MessengerAutoRdmaTest : public ::testing::Test {
 protected:
  static constexpr NodeId kA = 1;
  static constexpr NodeId kB = 2;
  static constexpr std::uint32_t kEcho = 1;
  static constexpr std::uint32_t kNote = 2;
  static constexpr ServiceId kWatch = 9;  // a user of every session: its events

  void SetUp() override {
    const char* addr = std::getenv("RMSG_RDMA_ADDR");
    ASSERT_NE(addr, nullptr) << "RMSG_RDMA_ADDR is not set: run in the Soft-RoCE guest";
    ASSERT_TRUE(rdma_device_available()) << "no RDMA device with an active port";
    any_ = SocketAddress::from_host_port(addr, 0).value();
    EventLoopOptions lo;
    lo.seed = seed_for("loop");
    loop_ = EventLoop::create(lo).value();
    a_ = RpcEndpoint::create(*loop_, options(kA)).value();
    b_ = RpcEndpoint::create(*loop_, options(kB)).value();
    ASSERT_TRUE(a_->messenger()
                    .attach(
                        kWatch, [](NodeId, std::span<const std::byte>) {},
                        [this](SessionEvent e) { events_.push_back(std::move(e)); })
                    .ok());
    b_->handle(kEcho, [](const RpcRequest& r, RpcResponder reply) { reply.ok(r.body); });
    b_->handle_oneway(
        kNote, [this](const RpcRequest& r) { notes_.emplace_back(r.body.begin(), r.body.end()); });
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    loop_->run_for([] { return false; }, milliseconds(20));
  }

  // The default handshake bound: rpc_options' 1 s is less than an RDMA connect's setup
  // takes in a starved ASan guest (the first connect then fails over to TCP).
  static RpcOptions options(NodeId id) {
    RpcOptions o = rpc_options(id);
    o.messenger.handshake_timeout = MessengerOptions{}.handshake_timeout;
    return o;
  }
  std::string failures() const {
    std::string s;
    for (const auto& e : events_) {
      if (e.kind == SessionEvent::Kind::failed) s += e.error.message() + "; ";
    }
    return s;
  }

  // `n` calls and `n` one-way messages of seeded random bytes, sizes 1 B to 256 KiB; every
  // reply and every note is compared byte for byte with what was sent.
  void exchange(int n) {
    std::vector<std::vector<std::byte>> sent;
    std::vector<std::optional<RpcResponse>> got(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      const std::size_t size = std::size_t{1} << (i % 19);
      sent.push_back(random_bytes(size, fresh_seed("body") + static_cast<std::uint32_t>(i)));
      ASSERT_TRUE(a_->notify(kB, kNote, sent.back()).ok());
      auto id = a_->call(kB, kEcho, sent.back(), seconds(20), [&got, i](RpcResponse r) {
        got[static_cast<std::size_t>(i)] = std::move(r);
      });
      ASSERT_TRUE(id.ok()) << id.error().message();
    }
    ASSERT_TRUE(loop_->run_for(
        [&] {
          for (const auto& g : got) {
            if (!g) return false;
          }
          return notes_.size() >= sent.size();
        },
        seconds(30)));
    for (std::size_t i = 0; i < sent.size(); ++i) {
      ASSERT_FALSE(got[i]->error) << i << ": " << got[i]->error.message();
      EXPECT_EQ(got[i]->body, sent[i]) << "reply " << i;
    }
    // Small notes take the priority lane and may overtake large ones: each once, any order.
    ASSERT_EQ(notes_.size(), sent.size());
    std::vector<bool> matched(sent.size(), false);
    for (const auto& note : notes_) {
      std::size_t i = 0;
      while (i < sent.size() && (matched[i] || sent[i] != note)) ++i;
      ASSERT_LT(i, sent.size()) << "a note of " << note.size() << " bytes was never sent";
      matched[i] = true;
    }
  }
  std::optional<Transport> transport_to_b() const {
    auto info = a_->messenger().session_info(kB);
    return info ? info->transport : std::nullopt;
  }
  int count(SessionEvent::Kind k) const {
    int n = 0;
    for (const auto& e : events_) n += e.kind == k;
    return n;
  }

  SocketAddress any_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<RpcEndpoint> a_;
  std::unique_ptr<RpcEndpoint> b_;
  std::vector<std::vector<std::byte>> notes_;
  std::vector<SessionEvent> events_;
};

TEST_F(MessengerAutoRdmaTest, NoTransportNamedGoesOverRdmaWithADevice) {
  auto bound = b_->messenger().listen(any_);
  ASSERT_TRUE(bound.ok()) << bound.error().message();
  ASSERT_TRUE(a_->messenger().add_peer(kB, SocketAddress::parse(bound.value()).value()).ok());
  exchange(40);
  EXPECT_EQ(transport_to_b(), Transport::rdma);
  EXPECT_EQ(a_->messenger().counter_total("msg.connect_failures"), 0u) << failures();
  EXPECT_EQ(count(SessionEvent::Kind::switched), 0);
}

TEST_F(MessengerAutoRdmaTest, ATcpOnlyServerIsReachedOverTcpAfterOneRefusal) {
  ConnectionParams tcp;
  tcp.transport = Transport::tcp;
  auto bound = b_->messenger().listen(any_, tcp);
  ASSERT_TRUE(bound.ok()) << bound.error().message();
  ASSERT_TRUE(a_->messenger().add_peer(kB, SocketAddress::parse(bound.value()).value()).ok());
  exchange(8);
  EXPECT_EQ(transport_to_b(), Transport::tcp);
  // The exact measure of "no deadline waited out": one RDMA connect failed, and it failed
  // because nobody listens there (refused), not because a connect step timed out.
  EXPECT_EQ(a_->messenger().counter_total("msg.connect_failures"), 1u);
  ASSERT_EQ(count(SessionEvent::Kind::failed), 1) << failures();
  for (const auto& e : events_) {
    if (e.kind != SessionEvent::Kind::failed) continue;
    EXPECT_EQ(error_kind(e.error), ErrorKind::unreachable) << e.error.message();
  }
}

}  // namespace
}  // namespace rmsg::testing
