// ServiceTable: routing a shard's messages and events to the messenger's users.
#include "msg/services.h"

#include <utility>
#include <vector>

namespace rmsg::msg {

bool ServiceTable::attach(ServiceId service, User user) {
  return users_.emplace(service, std::make_shared<const User>(std::move(user))).second;
}

void ServiceTable::dispatch(NodeId from, ServiceId service, std::span<const std::byte> payload) {
  auto it = users_.find(service);
  if (it == users_.end() || !it->second->dispatch) {
    unknown_.add_owned();
    return;
  }
  const std::shared_ptr<const User> user = it->second;  // it may detach itself
  user->dispatch(from, payload);
}

void ServiceTable::event(ShardEvent e) {
  std::vector<std::pair<ServiceId, std::shared_ptr<const User>>> users(users_.begin(),
                                                                       users_.end());
  for (auto& [service, user] : users) {
    if (!user->on_event) continue;
    SessionEvent mine{e.event.kind, e.event.peer, e.event.error, {}, {}};
    // Each user gets its own messages back (copies: resets are rare).
    for (std::size_t i = 0; i < e.event.unknown.size(); ++i) {
      const ServiceId s = i < e.unknown_services.size() ? e.unknown_services[i] : 0;
      if (s == service) mine.unknown.push_back(e.event.unknown[i]);
    }
    for (std::size_t i = 0; i < e.event.unsent.size(); ++i) {
      const ServiceId s = i < e.unsent_services.size() ? e.unsent_services[i] : 0;
      if (s == service) mine.unsent.push_back(e.event.unsent[i]);
    }
    user->on_event(std::move(mine));
  }
}

}  // namespace rmsg::msg
