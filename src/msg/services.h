// ServiceTable: one shard's (loop's) users of its sessions, by service id (rmsg/messenger.h,
// Services). Messages go to their service's dispatch; session events to every user, each
// with the handed-back messages of its own service only.
//
// Threading: the shard's loop thread only (the messenger front applies attach/detach there).
// Callbacks may attach or detach users, including themselves: a user detached while a
// callback runs is kept until the outermost callback returned (no reference counting per
// message).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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

  explicit ServiceTable(Counter& unknown) noexcept : unknown_(unknown) {}

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
  std::map<ServiceId, std::unique_ptr<const User>> users_;
  std::vector<std::unique_ptr<const User>> gone_;
  int running_ = 0;
};

}  // namespace rmsg::msg
