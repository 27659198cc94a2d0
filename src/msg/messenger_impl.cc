// Messenger::Impl's public entry points (listen, add_peer, send, mark_down, shutdown) and
// its construction.
#include <algorithm>
#include <utility>

#include "msg/messenger_impl.h"

namespace rmsg {

Messenger::Impl::Impl(EventLoop& loop, const MessengerOptions& options,
                      std::unique_ptr<StreamFactory> streams, ShardDispatch dispatch,
                      ShardEventCallback on_event, std::shared_ptr<msg::Admission> admission)
    : loop_(loop),
      options_(options),
      streams_(std::move(streams)),
      dispatch_(std::move(dispatch)),
      on_event_(std::move(on_event)),
      admission_(std::move(admission)) {
  probe_policy_ = {options.probe_backoff_initial, options.probe_backoff_max};
  limits_ = {options.session_max_messages, options.session_max_bytes, options.window_messages,
             options.window_bytes, options.fragment_size};
  if (!admission_) {
    admission_ = std::make_shared<msg::Admission>(limits_, options.total_max_messages,
                                                  options.total_max_bytes);
  }
  ack_policy_ = {options.ack_every, options.ack_delay};
  backoff_policy_ = {options.backoff_initial, options.backoff_max};
  frame_limits_.max_frame_size =
      static_cast<std::uint32_t>(options.max_message_size + msg::MessageHeader::kSize);
}

Messenger::Impl::~Impl() = default;

Result<std::string> Messenger::Impl::listen(const SocketAddress& address,
                                            const ConnectionParams& params) {
  std::weak_ptr<Impl> weak = weak_from_this();
  const Transport t = params.transport;
  auto l = streams_->listen(address, params, [weak, t](Stream s) {
    if (auto self = weak.lock()) self->on_accepted(std::move(s), t);
  });
  if (!l) return l.error();
  std::string bound = l.value().local_address();
  listeners_.push_back(std::move(l).value());
  return bound;
}

Result<void> Messenger::Impl::add_peer(NodeId peer, const ConnectionParams& params) {
  if (peer == 0 || peer == options_.node_id) return make_error_code(Errc::invalid_argument);
  peers_[peer] = params;
  routes_.erase(peer);  // one address: no failover
  if (Session* s = find_session(peer); s != nullptr && s->out().size() > 0) want_connection(*s);
  return {};
}

void Messenger::Impl::set_policy(NodeId peer, SessionPolicy policy) {
  policies_[peer] = policy;
  if (Session* s = find_session(peer)) s->policy = policy;
}

void Messenger::Impl::mark_down(NodeId peer) {
  peers_.erase(peer);
  routes_.erase(peer);
  if (find_session(peer) == nullptr) return;
  erase_session(peer);
  note_total_room();
  check_drained();
}

std::optional<Messenger::SessionInfo> Messenger::Impl::session_info(NodeId peer) const {
  auto it = sessions_.find(peer);
  if (it == sessions_.end()) return std::nullopt;
  const Session& s = *it->second;
  Messenger::SessionInfo info{s.connected(), s.out().size(), s.out().in_flight(),
                              s.in.in_seq(), s.connect_seq,  {}};
  if (info.connected) info.transport = s.fo.current;
  if (auto c = conns_.find(s.conn()); info.connected && c != conns_.end()) {
    info.authenticated = c->second->authenticated == peer;
  }
  return info;
}

std::vector<NodeId> Messenger::Impl::session_peers() const {
  std::vector<NodeId> peers;
  peers.reserve(sessions_.size());
  for (const auto& [peer, s] : sessions_) peers.push_back(peer);
  std::sort(peers.begin(), peers.end());
  return peers;
}

Cookie Messenger::Impl::session_cookie(NodeId peer) {
  const Session* s = find_session(peer);
  return s != nullptr ? s->my_cookie() : 0;
}

void Messenger::Impl::set_front_hooks(FrontHooks hooks) {
  on_total_room_ = std::move(hooks.on_total_room);
  owns_ = std::move(hooks.owns);
  owner_loop_ = std::move(hooks.owner_loop);
  to_owner_ = std::move(hooks.to_owner);
}

void Messenger::Impl::shutdown() {
  shutting_down_ = true;
  drainer_.abandon();  // the destructor during a drain: done() is not called
  drain_done_ = nullptr;
  for (auto& l : listeners_) l.close();
  listeners_.clear();
  relays_.clear();  // their owners see connection_reset
  std::vector<ConnId> ids;
  ids.reserve(conns_.size());
  for (auto& [id, c] : conns_) ids.push_back(id);
  for (ConnId id : ids) {
    Connection* c = find_connection(id);
    if (c == nullptr) continue;
    if (c->state() == Connection::State::open) {
      const auto reason = msg::encode(msg::Reason{msg::CloseReason::shutdown});
      c->queue_control(msg::FrameType::close, reason);
      flush(*c);
      drop(id, true);
    } else {
      drop(id, false);
    }
  }
  for (auto& [peer, s] : sessions_) {
    if (s->timer != 0) loop_.cancel_timer(s->timer);
  }
  admission_->live_sessions.fetch_sub(sessions_.size(), std::memory_order_relaxed);
  sessions_.clear();
  unconnected_.clear();
  if (expiry_timer_ != 0) loop_.cancel_timer(expiry_timer_);
  expiry_timer_ = 0;
  session_cache_peer_ = 0;
  session_cache_ = nullptr;
  paused_sessions_ = 0;
  slot_waiters_.clear();
  inbound_handshakes_.clear();
}

}  // namespace rmsg
