// ServiceTable: routing a shard's messages and events to the messenger's users.
#include "msg/services.h"

#include <utility>
#include <vector>

namespace rmsg::msg {

bool ServiceTable::attach(ServiceId service, User user) {
  return users_.emplace(service, std::make_unique<const User>(std::move(user))).second;
}

void ServiceTable::detach(ServiceId service) {
  auto it = users_.find(service);
  if (it == users_.end()) return;
  if (running_ > 0) gone_.push_back(std::move(it->second));  // it may be running now
  users_.erase(it);
}

void ServiceTable::dispatch(NodeId from, ServiceId service, std::span<const std::byte> payload) {
  auto it = users_.find(service);
  if (it == users_.end() && late_) {  // attached on another thread, not posted here yet?
    if (std::optional<User> user = late_(service)) {
      it = users_.emplace(service, std::make_unique<const User>(std::move(*user))).first;
    }
  }
  if (it == users_.end() || !it->second->dispatch) {
    unknown_.add_owned();
    return;
  }
  const Running running(*this);
  it->second->dispatch(from, payload);
}

void ServiceTable::event(ShardEvent e) {
  const Running running(*this);
  // The handback is split by service below; every other field goes to each user as it is.
  const auto unknown = std::move(e.event.unknown);
  const auto unsent = std::move(e.event.unsent);
  e.event.unknown.clear();
  e.event.unsent.clear();
  std::vector<std::pair<ServiceId, const User*>> users;
  for (const auto& [service, user] : users_) users.emplace_back(service, user.get());
  for (auto& [service, user] : users) {
    // Skip a user an earlier one detached meanwhile.
    auto it = users_.find(service);
    if (it == users_.end() || it->second.get() != user || !user->on_event) continue;
    SessionEvent mine = e.event;
    // Each user gets its own messages back (copies: resets are rare).
    for (std::size_t i = 0; i < unknown.size(); ++i) {
      const ServiceId s = i < e.unknown_services.size() ? e.unknown_services[i] : 0;
      if (s == service) mine.unknown.push_back(unknown[i]);
    }
    for (std::size_t i = 0; i < unsent.size(); ++i) {
      const ServiceId s = i < e.unsent_services.size() ? e.unsent_services[i] : 0;
      if (s == service) mine.unsent.push_back(unsent[i]);
    }
    user->on_event(std::move(mine));
  }
}

}  // namespace rmsg::msg
