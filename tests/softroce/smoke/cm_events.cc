#include "softroce/smoke/cm_events.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace rmsg::softroce {

double ms_since(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string guest_addr() {
  return env_or_empty("RMSG_RDMA_ADDR");
}

std::optional<sockaddr_in> ipv4(const std::string& host, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) return std::nullopt;
  return sa;
}

std::string describe(const CmEvent& ev) {
  return std::string(rdma_event_str(ev.type)) + " (status " + std::to_string(ev.status) + ")";
}

EventChannel::EventChannel() {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) return;
  int flags = fcntl(ch->fd, F_GETFL);
  if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    rdma_destroy_event_channel(ch);
    return;
  }
  ch_ = ch;
}

EventChannel::~EventChannel() {
  if (ch_) rdma_destroy_event_channel(ch_);
}

std::optional<CmEvent> EventChannel::try_next() {
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch_, &ev) != 0) return std::nullopt;  // EAGAIN: nothing queued
  CmEvent out{ev->event, ev->id, ev->listen_id, ev->status, ev->param.conn.qp_num, 0};
  rdma_ack_cm_event(ev);
  return out;
}

std::optional<CmEvent> next_event(std::span<EventChannel* const> channels, Deadline deadline) {
  std::vector<pollfd> fds;
  for (EventChannel* ch : channels) fds.push_back({ch->get()->fd, POLLIN, 0});
  for (;;) {
    for (std::size_t i = 0; i < channels.size(); ++i) {
      if (auto ev = channels[i]->try_next()) {
        ev->channel = static_cast<int>(i);
        return ev;
      }
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return std::nullopt;
    if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) {
      return std::nullopt;
    }
  }
}

void CmIdDeleter::operator()(rdma_cm_id* id) const {
  if (id->qp) rdma_destroy_qp(id);
  rdma_destroy_id(id);
}

}  // namespace rmsg::softroce
