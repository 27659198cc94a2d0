// MessengerPort: the messenger's calls for the layer above, forwarded to its front and to
// the shard (messenger_port.h).
#include "msg/messenger_port.h"

#include <utility>

#include "loop/loop_thread.h"
#include "msg/messenger_front.h"
#include "msg/messenger_impl.h"

namespace rmsg::msg {

Result<std::unique_ptr<Messenger>> MessengerPort::create(std::span<EventLoop* const> loops,
                                                         const MessengerOptions& options,
                                                         const MakeStreams& make_streams,
                                                         Messenger::DispatchCallback dispatch,
                                                         Messenger::EventCallback on_event) {
  return MessengerAccess::create(loops, options, make_streams, std::move(dispatch),
                                 std::move(on_event));
}

MessengerPort::MessengerPort(Messenger& m, std::size_t index) : messenger_(&m) {
  Messenger::Front& front = Messenger::Front::of(m);
  Messenger::Front::Shard& sh = front.shards_[index];
  front_ = &front;
  options_ = &front.options_;
  loop_ = sh.loop;
  shard_ = sh.impl.get();
  dispatch_rx_ = &shard_->dispatch_time();
  pool_ = &shard_->payload_pool();
}

std::size_t MessengerPort::owner(NodeId peer) const noexcept {
  return front_->owner(peer);
}

Result<void> MessengerPort::send(NodeId peer, std::vector<std::byte> payload,
                                 const Messenger::SendOptions& options) const {
  return messenger_->send(peer, std::move(payload), options);
}

Result<void> MessengerPort::send_tracked(NodeId peer, std::vector<std::byte> payload,
                                         const Messenger::SendOptions& options,
                                         Queued queued) const {
  return front_->send_tracked(peer, std::move(payload), options, std::move(queued));
}

void MessengerPort::close() noexcept {
  shard_ = nullptr;
  dispatch_rx_ = nullptr;
  pool_ = nullptr;
}

Result<Messenger::Ticket> MessengerPort::send_here(NodeId peer, std::vector<std::byte>&& payload,
                                                   const Messenger::SendOptions& options,
                                                   bool draining_ok) const {
  RMSG_ASSERT_LOOP_THREAD(*loop_);
  return shard_->send_tracked(peer, std::move(payload), options, draining_ok);
}

bool MessengerPort::withdraw(NodeId peer, Messenger::Ticket ticket) const {
  RMSG_ASSERT_LOOP_THREAD(*loop_);
  return shard_->withdraw(peer, ticket);
}

void MessengerPort::set_read_paused(NodeId peer, bool paused) const {
  RMSG_ASSERT_LOOP_THREAD(*loop_);
  shard_->set_paused(peer, paused);
}

std::uint64_t MessengerPort::session_cookie(NodeId peer) const {
  RMSG_ASSERT_LOOP_THREAD(*loop_);
  return shard_->session_cookie(peer);
}

std::vector<std::pair<NodeId, Messenger::SessionInfo>> MessengerPort::sessions() const {
  RMSG_ASSERT_LOOP_THREAD(*loop_);
  std::vector<std::pair<NodeId, Messenger::SessionInfo>> out;
  for (NodeId peer : shard_->session_peers()) {
    if (auto info = shard_->session_info(peer)) out.emplace_back(peer, *info);
  }
  return out;
}

}  // namespace rmsg::msg
