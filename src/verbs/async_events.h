// Asynchronous device events (ibv_get_async_event): the device context's async_fd, made
// non-blocking, is watched by every EventLoop that has a registered QP on that device.
// Whichever loop reads an event acks it at once and routes it to the registrations it
// concerns: a QP event to the QP's owner, CQ_ERR to the owner of that CQ, a port event to
// every owner on that port, DEVICE_FATAL to every owner on the device. An owner on
// another loop gets it through that loop's post(). A context is forgotten (its fd no longer
// watched, its setup dropped) with its last registration, so a device made again whose
// context lands at the same address is set up anew.
//
// Threading: register and destroy a registration on the loop passed in; the handler runs
// on that loop's thread. The loop must outlive its registrations.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>

#include "rmsg/event_loop.h"
#include "rmsg/result.h"

namespace rmsg::verbs {

struct AsyncEvent {
  ibv_event_type type;
  std::uint8_t port = 0;  // port events only
};
using AsyncHandler = std::function<void(const AsyncEvent&)>;

struct AsyncEntry;

// Move-only; destroying it stops the routing (no handler runs afterwards).
class AsyncRegistration {
 public:
  AsyncRegistration() = default;
  explicit AsyncRegistration(std::shared_ptr<AsyncEntry> entry) : entry_(std::move(entry)) {}
  AsyncRegistration(AsyncRegistration&&) noexcept = default;
  AsyncRegistration& operator=(AsyncRegistration&& o) noexcept {
    if (this != &o) {
      reset();
      entry_ = std::move(o.entry_);
    }
    return *this;
  }
  AsyncRegistration(const AsyncRegistration&) = delete;
  AsyncRegistration& operator=(const AsyncRegistration&) = delete;
  ~AsyncRegistration() { reset(); }
  void reset();

 private:
  std::shared_ptr<AsyncEntry> entry_;
};

struct AsyncTarget {
  ibv_context* context = nullptr;
  ibv_qp* qp = nullptr;
  std::array<ibv_cq*, 2> cqs{};
  std::uint8_t port = 0;
};

// Routes the events that concern `target` to `handler`. Errors: from fcntl/epoll.
Result<AsyncRegistration> watch_async_events(EventLoop& loop, const AsyncTarget& target,
                                             AsyncHandler handler);

}  // namespace rmsg::verbs
