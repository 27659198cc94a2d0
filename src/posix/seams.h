// What rmsg's own tests may see of the socket layer's state (never installed). Reached
// only from tests/posix/ through librmsg's copy of the layer.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace rmsg::posix::seams {

struct Registration {
  int epoll_fd = -1;  // the lowest number of the set in this process
  std::uint32_t events = 0;
  std::uint64_t data = 0;
};

// The epoll registrations recorded for managed fd whose set is still open, at most `max`
// of them; -1 when fd is not managed or its registrations are incomplete (more sets than
// the table keeps, or a set the shim did not see made).
int registrations(int fd, Registration* out, int max);

// The RMSG_STATS line's "peer" text for an address (stats.cc's own formatter, which must
// not use inet_ntop: a close in a signal handler may write a line).
std::string peer_text(const sockaddr_in6& peer);

// What the stats line would say of managed connection fd now (its RDMA upgrade).
struct UpgradeView {
  bool managed = false;
  bool on_rdma = false;  // "transport": the path of the last byte
  std::uint64_t bytes_in = 0, bytes_out = 0, rdma_bytes_in = 0, rdma_bytes_out = 0;
  std::uint64_t upgrade_us = 0;
  std::string fallback;  // "none" once upgraded
};
UpgradeView upgrade_view(int fd);

}  // namespace rmsg::posix::seams
