#include "rdma_devices.h"

#include <cerrno>
#include <cstring>
#include <string>

#ifdef RMSG_WITH_RDMA
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#endif

namespace rmsg::info {

#ifndef RMSG_WITH_RDMA

int print_rdma_devices(std::FILE* out) {
  std::fprintf(out, "rdma devices: not checked (built without RMSG_WITH_RDMA)\n");
  return 0;
}

#else

namespace {

int mtu_bytes(ibv_mtu mtu) {
  return 128 << static_cast<int>(mtu);
}

int print_ports(std::FILE* out, ibv_context* ctx) {
  ibv_device_attr dev{};
  if (ibv_query_device(ctx, &dev) != 0) {
    std::fprintf(out, "    ibv_query_device: %s\n", std::strerror(errno));
    return 0;
  }
  int active = 0;
  for (int p = 1; p <= dev.phys_port_cnt; ++p) {
    ibv_port_attr attr{};
    if (ibv_query_port(ctx, static_cast<std::uint8_t>(p), &attr) != 0) {
      std::fprintf(out, "    port %d: ibv_query_port: %s\n", p, std::strerror(errno));
      continue;
    }
    active += attr.state == IBV_PORT_ACTIVE ? 1 : 0;
    char gid_text[INET6_ADDRSTRLEN] = "-";
    ibv_gid gid{};
    if (ibv_query_gid(ctx, static_cast<std::uint8_t>(p), 0, &gid) == 0) {
      inet_ntop(AF_INET6, gid.raw, gid_text, sizeof gid_text);
    }
    std::fprintf(out, "    port %d: %s, %s, active MTU %d, gid[0] %s\n", p,
                 ibv_port_state_str(attr.state),
                 attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand",
                 mtu_bytes(attr.active_mtu), gid_text);
  }
  return active;
}

}  // namespace

int print_rdma_devices(std::FILE* out) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    std::fprintf(out, "rdma devices: no RDMA devices%s%s\n", list ? "" : " (",
                 list ? "" : (std::string(std::strerror(errno)) + ")").c_str());
    if (list) ibv_free_device_list(list);
    return 0;
  }
  std::fprintf(out, "rdma devices: %d\n", n);
  int active = 0;
  for (int i = 0; i < n; ++i) {
    std::fprintf(out, "  %s (%s)\n", ibv_get_device_name(list[i]),
                 ibv_node_type_str(list[i]->node_type));
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) {
      std::fprintf(out, "    ibv_open_device: %s\n", std::strerror(errno));
      continue;
    }
    active += print_ports(out, ctx);
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  return active;
}

#endif

}  // namespace rmsg::info
