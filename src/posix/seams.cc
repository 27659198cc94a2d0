#include "posix/seams.h"

#include "posix/runtime.h"
#include "posix/stats.h"

namespace rmsg::posix::seams {
namespace {

int number_of_epoll(const Runtime& rt, std::uint32_t id) {
  for (int fd = 0; fd <= rt.table.max_fd_seen(); ++fd) {
    const FdSlot* s = rt.table.slot(fd);
    if (s != nullptr && s->epoll_id.load(std::memory_order_acquire) == id) return fd;
  }
  return -1;
}

}  // namespace

int registrations(int fd, Registration* out, int max) {
  Runtime* rt = runtime();
  const FdSlot* s = rt == nullptr ? nullptr : rt->table.slot(fd);
  if (s == nullptr || s->object.load(std::memory_order_acquire) == 0 ||
      (s->flags.load(std::memory_order_acquire) & kFdRegistrationsLost) != 0) {
    return -1;
  }
  int n = 0;
  for (const auto& r : s->registrations) {
    std::uint32_t id = r.epoll_id.load(std::memory_order_acquire);
    int ep = id == 0 ? -1 : number_of_epoll(*rt, id);
    if (ep < 0 || n == max) continue;
    out[n++] = {ep, r.events.load(std::memory_order_acquire),
                r.data.load(std::memory_order_acquire)};
  }
  return n;
}

std::string peer_text(const sockaddr_in6& peer) {
  char buf[128];
  return std::string(buf, format_peer(peer, buf, sizeof buf));
}

}  // namespace rmsg::posix::seams

namespace rmsg::posix::seams {

UpgradeView upgrade_view(int fd) {
  UpgradeView v;
  Runtime* rt = runtime();
  const SocketObject* o = rt == nullptr ? nullptr : rt->table.object(fd);
  if (o == nullptr) return v;
  v.managed = true;
  v.on_rdma = o->on_rdma.load();
  v.bytes_in = o->bytes_in.load();
  v.bytes_out = o->bytes_out.load();
  v.rdma_bytes_in = o->rdma_bytes_in.load();
  v.rdma_bytes_out = o->rdma_bytes_out.load();
  v.upgrade_us = o->upgrade_us.load();
  v.fallback = fallback_name(o->fallback.load());
  return v;
}

}  // namespace rmsg::posix::seams
