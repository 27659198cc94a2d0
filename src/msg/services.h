// ServiceTable: one shard's (loop's) users of its sessions, by service id (rmsg/messenger.h,
// Services). Messages go to their service's dispatch; session events to every user, each
// with the handed-back messages of its own service only.
//
// Threading: the shard's loop thread only (the messenger front applies attach/detach there).
// Callbacks may attach or detach users, including themselves: a user's callbacks are held
// by shared_ptr while they run.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

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
  void detach(ServiceId service) { users_.erase(service); }

  void dispatch(NodeId from, ServiceId service, std::span<const std::byte> payload);
  void event(ShardEvent e);

 private:
  Counter& unknown_;
  std::map<ServiceId, std::shared_ptr<const User>> users_;
};

}  // namespace rmsg::msg
