// RelayChannel: bounded pipes between loop 0 and an owner shard (relay_channel.h).
#include "msg/relay_channel.h"

#include <algorithm>

namespace rmsg::msg {

RelayChannel::RelayChannel(EventLoop& near_loop, EventLoop& far_loop, std::size_t capacity)
    : loop_{&near_loop, &far_loop}, capacity_(std::max<std::size_t>(capacity, 1)) {}

std::size_t RelayChannel::push(Side from, std::span<const std::byte> data) {
  const std::lock_guard lock(mu_);
  Pipe& p = toward(other(from));
  if (p.ended) return 0;
  const std::size_t n = std::min(data.size(), capacity_ - std::min(capacity_, p.bytes.size()));
  p.bytes.insert(p.bytes.end(), data.begin(), data.begin() + static_cast<std::ptrdiff_t>(n));
  return n;
}

RelayChannel::Pulled RelayChannel::pull(Side to, std::span<std::byte> out) {
  const std::lock_guard lock(mu_);
  Pipe& p = toward(to);
  const std::size_t n = std::min(out.size(), p.bytes.size());
  if (n > 0) {
    std::copy_n(p.bytes.begin(), n, out.begin());
    p.bytes.erase(p.bytes.begin(), p.bytes.begin() + static_cast<std::ptrdiff_t>(n));
    return {n, false, {}};
  }
  return {0, p.ended && !p.error, p.ended ? p.error : std::error_code{}};
}

void RelayChannel::finish(Side from, std::error_code error) {
  {
    const std::lock_guard lock(mu_);
    Pipe& p = toward(other(from));
    if (p.ended) return;
    p.ended = true;
    p.error = error;
    if (error) p.bytes.clear();
  }
  wake(kNear);
  wake(kFar);
}

bool RelayChannel::ended(Side to) const {
  const std::lock_guard lock(mu_);
  return toward(to).ended;
}

std::error_code RelayChannel::write_error(Side from) const {
  const std::lock_guard lock(mu_);
  return toward(from).error;  // the pipe the other side writes into us ended with an error
}

bool RelayChannel::readable(Side to) const {
  const std::lock_guard lock(mu_);
  const Pipe& p = toward(to);
  return !p.bytes.empty() || p.ended;
}

std::size_t RelayChannel::room(Side from) const {
  const std::lock_guard lock(mu_);
  const Pipe& p = toward(other(from));
  if (p.ended) return 0;
  return capacity_ - std::min(capacity_, p.bytes.size());
}

void RelayChannel::wake(Side side) {
  if (wake_pending_[side].exchange(true, std::memory_order_acq_rel)) return;
  loop_[side]->post([self = shared_from_this(), side] {
    self->wake_pending_[side].store(false, std::memory_order_release);
    if (self->handler_[side]) {
      auto h = self->handler_[side];  // the handler may clear itself
      h();
    }
  });
}

}  // namespace rmsg::msg
