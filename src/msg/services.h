// ServiceTable: one shard's (loop's) users of its sessions, by service id (rmsg/messenger.h,
// Services). Messages go to their service's dispatch; session events to every user, each
// with the handed-back messages of its own service only.
//
// Threading: the shard's loop thread only (the messenger front applies attach/detach there).
// Callbacks may attach or detach users, including themselves: a user detached while a
// callback runs is kept until the outermost callback returned (no reference counting per
// message). A message for a service this table does not know asks `late` (the front's
// record of attach() calls, any thread's, under its lock) before it counts as unknown: an
// attach() made on another thread that has not reached this loop yet takes effect for it
// at once (the posted attach then finds it there). Only that path pays for the lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "msg/messenger_impl.h"
#include "rmsg/counters.h"
#include "rmsg/messenger.h"

namespace rmsg::msg {

class ServiceTable {
 public:
  struct User {
    Messenger::DispatchCallback dispatch;
    Messenger::EventCallback on_event;
  };

  // The user attached to `service` now, if any (the front's record; any thread).
  using Late = std::function<std::optional<User>(ServiceId service)>;

  explicit ServiceTable(Counter& unknown, Late late = {}) noexcept
      : unknown_(unknown), late_(std::move(late)) {}

  // False when `service` is attached already.
  bool attach(ServiceId service, User user);
  void detach(ServiceId service);

  void dispatch(NodeId from, ServiceId service, std::span<const std::byte> payload);
  void event(ShardEvent e);

 private:
  // Counts the callbacks running; detached users wait in `gone_` until it is 0 again.
  struct Running {
    explicit Running(ServiceTable& t) noexcept : t_(t) { ++t_.running_; }
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    Running(Running&&) = delete;
    Running& operator=(Running&&) = delete;
    ~Running() {
      if (--t_.running_ == 0) t_.gone_.clear();
    }
    ServiceTable& t_;
  };

  Counter& unknown_;
  Late late_;
  std::map<ServiceId, std::unique_ptr<const User>> users_;
  std::vector<std::unique_ptr<const User>> gone_;
  int running_ = 0;
};

}  // namespace rmsg::msg
