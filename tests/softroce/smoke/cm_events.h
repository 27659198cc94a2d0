// Test helpers over raw librdmacm for the Soft-RoCE smoke tests: the guest's addresses,
// deadlines, and non-blocking rdma_cm event channels read with poll() until an event or
// a deadline (never a sleep).
#pragma once

#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace rmsg::softroce {

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

inline Deadline deadline_in(std::chrono::milliseconds d) {
  return SteadyClock::now() + d;
}
double ms_since(SteadyClock::time_point start);

// The variable's value, or "" when it is unset.
std::string env_or_empty(const char* name);
// RMSG_RDMA_ADDR, exported by tests/softroce/run: this guest's eth0 IPv4 address.
std::string guest_addr();
// Fails (an empty optional) for anything but a numeric IPv4 address.
std::optional<sockaddr_in> ipv4(const std::string& host, std::uint16_t port);

// What the tests need of an rdma_cm event, copied out so that the event can be acked at
// once (the ids it names stay valid; its private data would not).
struct CmEvent {
  rdma_cm_event_type type;
  rdma_cm_id* id;
  rdma_cm_id* listen_id;
  int status;
  std::uint32_t peer_qp_num;
  int channel;  // index into the channels passed to next_event()
};
std::string describe(const CmEvent& ev);

class EventChannel {
 public:
  // Check ok(): creation or O_NONBLOCK can fail.
  EventChannel();
  ~EventChannel();
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  bool ok() const { return ch_ != nullptr; }
  rdma_event_channel* get() const { return ch_; }
  // The next queued event (acked), or nothing when none is queued now.
  std::optional<CmEvent> try_next();

 private:
  rdma_event_channel* ch_ = nullptr;
};

// The next event on any of the channels, waiting in poll() until the deadline.
std::optional<CmEvent> next_event(std::span<EventChannel* const> channels, Deadline deadline);
inline std::optional<CmEvent> next_event(EventChannel& channel, Deadline deadline) {
  EventChannel* one[] = {&channel};
  return next_event(one, deadline);
}

// Destroys an rdma_cm id (and a QP that rdma_create_qp attached to it).
struct CmIdDeleter {
  void operator()(rdma_cm_id* id) const;
};
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;

}  // namespace rmsg::softroce
