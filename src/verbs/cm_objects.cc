// Owners of rdma_cm objects: event channel, cm id, cm event.
#include <fcntl.h>

#include <cerrno>

#include "rmsg/log.h"
#include "verbs/verbs.h"

namespace rmsg::verbs {
namespace detail {

void destroy_event_channel(rdma_event_channel* ch) {
  rdma_destroy_event_channel(ch);
}

void destroy_id(rdma_cm_id* id) {
  if (rdma_destroy_id(id) != 0) RMSG_LOG(warn, "rdma_destroy_id: errno %d", errno);
}

void ack_cm_event(rdma_cm_event* ev) {
  rdma_ack_cm_event(ev);
}

}  // namespace detail

Result<EventChannel> create_event_channel() {
  EventChannel ch(rdma_create_event_channel());
  // No /dev/infiniband/rdma_cm (no RDMA stack) reports ENODEV or ENOENT here.
  if (!ch) return errno_code(errno != 0 ? errno : ENODEV);
  const int flags = fcntl(ch->fd, F_GETFL);
  if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno_code(errno);
  if (fcntl(ch->fd, F_SETFD, FD_CLOEXEC) != 0) return errno_code(errno);
  return ch;
}

Result<CmId> create_id(rdma_event_channel* channel, void* context) {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel, &id, context, RDMA_PS_TCP) != 0) return errno_code(errno);
  return CmId(id);
}

Result<CmEvent> get_cm_event(rdma_event_channel* channel) {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(channel, &ev) != 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Errc::would_block;
    return errno_code(errno);
  }
  return CmEvent(ev);
}

}  // namespace rmsg::verbs
