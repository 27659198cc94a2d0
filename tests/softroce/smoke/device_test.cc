// The bed is real: the guest has a Soft-RoCE (rxe) device whose port is ACTIVE on
// Ethernet and whose GID table holds the guest NIC's IPv4 address (RoCE v2).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <memory>
#include <string>

#include "softroce/smoke/cm_events.h"

namespace rmsg::softroce {
namespace {

struct DeviceListFree {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct ContextClose {
  void operator()(ibv_context* ctx) const { ibv_close_device(ctx); }
};

// ::ffff:a.b.c.d, as rxe lists an IPv4 address in its GID table.
ibv_gid ipv4_mapped_gid(const std::string& addr) {
  ibv_gid gid{};
  gid.raw[10] = gid.raw[11] = 0xff;
  inet_pton(AF_INET, addr.c_str(), &gid.raw[12]);
  return gid;
}

TEST(SoftRoceDevice, RxeDeviceHasAnActivePortWithTheGuestAddress) {
  const std::string addr = guest_addr();
  ASSERT_FALSE(addr.empty()) << "RMSG_RDMA_ADDR is unset: run me with tests/softroce/run";

  int count = 0;
  std::unique_ptr<ibv_device*, DeviceListFree> list(ibv_get_device_list(&count));
  ASSERT_TRUE(list) << "ibv_get_device_list: " << std::strerror(errno);
  ibv_device* rxe = nullptr;
  for (int i = 0; i < count; ++i) {
    if (std::strncmp(ibv_get_device_name(list.get()[i]), "rxe", 3) == 0) rxe = list.get()[i];
  }
  ASSERT_NE(rxe, nullptr) << "no rxe device among " << count << " RDMA devices";

  std::unique_ptr<ibv_context, ContextClose> ctx(ibv_open_device(rxe));
  ASSERT_TRUE(ctx) << "ibv_open_device: " << std::strerror(errno);
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx.get(), 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(port.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_GE(port.active_mtu, IBV_MTU_1024);

  const ibv_gid want = ipv4_mapped_gid(addr);
  bool found = false;
  for (int i = 0; i < port.gid_tbl_len && !found; ++i) {
    ibv_gid gid{};
    found = ibv_query_gid(ctx.get(), 1, i, &gid) == 0 && std::memcmp(&gid, &want, sizeof gid) == 0;
  }
  EXPECT_TRUE(found) << "no GID for " << addr << " on " << ibv_get_device_name(rxe);
}

}  // namespace
}  // namespace rmsg::softroce
