#include "cm/tcp_target.h"

#include <utility>

namespace rmsg::cm {

void TcpTarget::open(Adopt adopt) {
  const std::lock_guard lock(mutex_);
  if (loop_ == nullptr) return;
  adopt_ = std::make_shared<Adopt>(std::move(adopt));
}

void TcpTarget::close() {
  const std::lock_guard lock(mutex_);
  loop_ = nullptr;
  adopt_.reset();
}

Result<void> TcpTarget::hand_off(tcp::OwnedSocket& socket, Lease& lease) {
  const std::lock_guard lock(mutex_);
  if (loop_ == nullptr || !adopt_) return Errc::cancelled;
  // A Task is copyable: the socket and its lease ride in a shared parcel (a task dropped
  // unrun closes the one and releases the other).
  struct Parcel {
    tcp::OwnedSocket socket;
    Lease lease;
  };
  auto parcel = std::make_shared<Parcel>(Parcel{std::move(socket), std::move(lease)});
  loop_->post(
      [adopt = adopt_, parcel] { (*adopt)(std::move(parcel->socket), std::move(parcel->lease)); });
  return {};
}

}  // namespace rmsg::cm
