// The device removed under a ConnectionManager with parked structures (guest only): the
// pooled structures and the shared PD must go at once, so that `rdma link delete` completes
// while the manager lives, and the same manager must connect again on fresh structures
// once the device is made again. The manager lives in cm_devremove_helper: a device can
// be deleted only while no process holds it open, and this test's process must hold none.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "kit/process_util.h"
#include "kit/rdma_fixture.h"

namespace rmsg::testing {
namespace {

using namespace std::chrono_literals;

std::string device_name() {
  const char* dev = std::getenv("RMSG_RDMA_DEVICE");
  return dev ? dev : "rxe0";
}

bool device_gone() {
  return !std::filesystem::exists("/sys/class/infiniband/" + device_name());
}

bool port_active() {
  std::ifstream in("/sys/class/infiniband/" + device_name() + "/ports/1/state");
  std::string s;
  std::getline(in, s);
  return s.find("ACTIVE") != std::string::npos;
}

// True when this process has a verbs device open (librdmacm keeps its contexts open).
bool holds_a_device() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code ec2;
    if (std::filesystem::read_symlink(e.path(), ec2).string().starts_with("/dev/infiniband/uverbs"))
      return true;
  }
  return false;
}

std::string cm_helper_path() {
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  return (self.parent_path() / "cm_devremove_helper").string();
}

// A spare rxe device (on a dummy netdev) for the test's lifetime: librdmacm (rdma-core 44)
// lets go of a removed device only while another one remains. On the way out, whatever
// happened, the test's device is there again and ACTIVE (later cases share the guest).
// Declare the helper's Child after this: it must be gone before the spare is deleted (it
// holds every device open).
class DeviceScope {
 public:
  explicit DeviceScope(EventLoop& loop) : loop_(loop) {
    added_ = std::system(
                 "ip link add rmsgspare0 type dummy && ip link set rmsgspare0 up && "
                 "rdma link add rxespare type rxe netdev rmsgspare0") == 0;
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  ~DeviceScope() {
    // A delete stuck on the (now killed) helper finishes once its files are closed.
    if (deleting_) {
      EXPECT_TRUE(wait(device_gone, 60s)) << "the delete never finished";
    }
    EXPECT_EQ(std::system("rdma link delete rxespare; ip link delete rmsgspare0"), 0);
    if (device_gone()) {
      EXPECT_TRUE(recreate());
    }
    EXPECT_TRUE(wait(port_active, 30s)) << "the rxe port did not come back";
  }
  bool added() const { return added_; }
  void deleting() { deleting_ = true; }
  bool recreate() {
    deleting_ = false;
    return std::system(("rdma link add " + device_name() + " type rxe netdev eth0").c_str()) == 0;
  }

 private:
  bool wait(bool (*done)(), Duration limit) {
    const TimerId tick = loop_.add_periodic(20ms, [] {});  // re-evaluates the predicate
    const bool ok = loop_.run_for(done, limit);
    loop_.cancel_timer(tick);
    return ok;
  }

  EventLoop& loop_;
  bool added_ = false;
  bool deleting_ = false;
};

class CmDeviceRemoval : public RdmaTest {
 protected:
  // The helper parks structures (and keeps a connection open unless `mode` is "idle");
  // this process deletes the device, then makes it again. `removed`: the pooled structures
  // the helper must report destroyed.
  void delete_and_recreate(const std::string& mode, int removed);
};

void CmDeviceRemoval::delete_and_recreate(const std::string& mode, int removed) {
  ASSERT_FALSE(holds_a_device()) << "run this case in a process of its own "
                                    "(--gtest_filter=CmDeviceRemoval.<case>)";
  DeviceScope devices(loop());
  ASSERT_TRUE(devices.added()) << "cannot add a spare rxe device on a dummy netdev";
  // Declared before the helper, so destroyed after it: a delete stuck in the kernel (D state,
  // unkillable) ends only once the helper is killed.
  std::optional<Child> del;
  Child helper({cm_helper_path(), address().host(), device_name(), mode});
  ASSERT_TRUE(helper.started());
  const std::string connected = helper.read_line(120000);
  ASSERT_TRUE(connected.starts_with("connected")) << "helper: '" << connected << "'";
  std::printf("%s\n", connected.c_str());

  const auto t0 = Clock::now();
  devices.deleting();
  del.emplace(std::vector<std::string>{"/bin/sh", "-c",
                                       "rdma link delete " + device_name() + "; echo rc=$?"});
  ASSERT_TRUE(del->started());
  const std::string deleted = del->read_line(30000);
  const double took = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const std::string gone = helper.read_line(90000);
  std::printf("delete: '%s' after %.0f ms\nhelper: %s\n", deleted.c_str(), took, gone.c_str());
  ASSERT_EQ(deleted, "rc=0") << "the delete did not complete while the manager lived";
  const std::string count = "structures.device_removed " + std::to_string(removed) + " ";
  EXPECT_TRUE(gone.find(count) != std::string::npos &&
              gone.find("left qp 0 cq 0 mr 0 pd 0") != std::string::npos)
      << gone;

  // The same manager, the device made again: fresh structures.
  ASSERT_TRUE(devices.recreate());
  const std::string reconnected = helper.read_line(90000);
  std::printf("helper: %s\n", reconnected.c_str());
  EXPECT_EQ(helper.wait(30000), 0) << gone << "\n" << reconnected;
  EXPECT_TRUE(reconnected.starts_with("reconnected")) << reconnected;
}

// Six structures parked, one pair open (two of them reused): the four idle ones go.
TEST_F(CmDeviceRemoval, PooledStructuresGoAtOnceAndTheManagerConnectsAgainOnTheNewDevice) {
  delete_and_recreate("open", 4);
}

// Only idle structures, no connection, no listener: the pool's sentinel id hears of it.
TEST_F(CmDeviceRemoval, IdleStructuresAloneStillGoWhenTheDeviceIsRemoved) {
  delete_and_recreate("idle", 6);
}

}  // namespace
}  // namespace rmsg::testing
