// The CM state machine's handling of the rdma_cm events that cannot be provoked on
// Soft-RoCE here: ADDR_CHANGE (Debian 12's kernel 6.1 emits it only on a bonding failover
// that changes the bound netdev's MAC) is fed as a synthetic event to a connection that
// is resolving a real address; DEVICE_REMOVAL after an earlier failure likewise (the
// real removal is RdmaFailure.DeviceRemoval* in tests/rdma/failure_test.cc). Runs in the
// guest: the connection needs a real rdma_cm event channel.
#include <gtest/gtest.h>

#include <vector>

#include "kit/rdma_fixture.h"
#include "rdmacm/cm_connection.h"

namespace rmsg::testing {
namespace {

// Records cm_failed; the connection never gets as far as wanting resources.
class RecordingDelegate final : public rdmacm::CmConnection::Delegate {
 public:
  std::vector<std::error_code> failures;

  Result<ibv_qp*> cm_acquire(rdma_cm_id* /*id*/, std::span<const std::byte> /*peer*/) override {
    return Errc::invalid_argument;
  }
  Result<void> cm_post_receives() override { return {}; }
  std::span<const std::byte> cm_private_data() override { return {}; }
  Result<void> cm_check_reply(std::span<const std::byte> /*peer*/) override { return {}; }
  std::error_code cm_rejected(int /*status*/, std::span<const std::byte> /*data*/) override {
    return make_error_code(Errc::rejected);
  }
  void cm_established() override {}
  void cm_failed(std::error_code ec) override { failures.push_back(ec); }
  void cm_disconnected() override {}
};

class CmEvents : public RdmaTest {
 protected:
  // A connection resolving the guest's address (port 1: nothing listens, nothing waits).
  std::unique_ptr<rdmacm::CmConnection> resolving(RecordingDelegate& delegate) {
    auto channel = rdmacm::CmChannel::for_loop(loop());
    EXPECT_TRUE(channel.ok()) << channel.error().message();
    if (!channel) return nullptr;
    auto conn =
        std::make_unique<rdmacm::CmConnection>(channel.value(), delegate, rdmacm::CmTuning{});
    SocketAddress peer = address();
    peer.set_port(1);
    auto started = conn->connect(peer);
    EXPECT_TRUE(started.ok()) << started.error().message();
    return conn;
  }
  static rdma_cm_event synthetic(rdma_cm_id* id, rdma_cm_event_type type) {
    rdma_cm_event ev{};
    ev.id = id;
    ev.event = type;
    return ev;
  }
};

TEST_F(CmEvents, AddrChangeFailsTheConnectionWithAddressError) {
  RecordingDelegate delegate;
  auto conn = resolving(delegate);
  ASSERT_TRUE(conn && conn->id());
  conn->on_cm_event(synthetic(conn->id(), RDMA_CM_EVENT_ADDR_CHANGE));
  ASSERT_EQ(delegate.failures.size(), 1u);
  EXPECT_EQ(delegate.failures[0], make_error_code(Errc::address_error));
  EXPECT_EQ(conn->state(), rdmacm::CmConnection::State::failed);
  // The real resolution that follows changes nothing.
  loop().run_for([] { return false; }, std::chrono::milliseconds(200));
  EXPECT_EQ(delegate.failures.size(), 1u);
}

TEST_F(CmEvents, DeviceRemovalFailsWithDeviceErrorAndRetiresTheId) {
  RecordingDelegate delegate;
  auto conn = resolving(delegate);
  ASSERT_TRUE(conn && conn->id());
  conn->on_cm_event(synthetic(conn->id(), RDMA_CM_EVENT_DEVICE_REMOVAL));
  ASSERT_EQ(delegate.failures.size(), 1u);
  EXPECT_EQ(delegate.failures[0], make_error_code(Errc::device_error));
  EXPECT_EQ(conn->id(), nullptr) << "the removal waits for the id: it must go at once";
}

TEST_F(CmEvents, DeviceRemovalAfterAFailureTellsTheDelegateAgain) {
  RecordingDelegate delegate;
  auto conn = resolving(delegate);
  ASSERT_TRUE(conn && conn->id());
  conn->expire(make_error_code(Errc::timeout));
  conn->on_cm_event(synthetic(conn->id(), RDMA_CM_EVENT_DEVICE_REMOVAL));
  ASSERT_EQ(delegate.failures.size(), 2u);
  EXPECT_EQ(delegate.failures[0], make_error_code(Errc::timeout));
  EXPECT_EQ(delegate.failures[1], make_error_code(Errc::device_error));
  EXPECT_EQ(conn->id(), nullptr);
}

}  // namespace
}  // namespace rmsg::testing
