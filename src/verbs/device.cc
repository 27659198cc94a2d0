// Device discovery for callers that choose a transport (perf's --transport auto).
#include "verbs/verbs.h"

namespace rmsg::verbs {

bool any_active_port() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return false;
  bool found = false;
  for (int i = 0; i < n && !found; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) continue;
    ibv_device_attr dev{};
    if (ibv_query_device(ctx, &dev) == 0) {
      for (int port = 1; port <= dev.phys_port_cnt && !found; ++port) {
        ibv_port_attr attr{};
        found = ibv_query_port(ctx, static_cast<std::uint8_t>(port), &attr) == 0 &&
                attr.state == IBV_PORT_ACTIVE;
      }
    }
    ibv_close_device(ctx);  // opened here, not librdmacm's
  }
  ibv_free_device_list(list);
  return found;
}

}  // namespace rmsg::verbs
