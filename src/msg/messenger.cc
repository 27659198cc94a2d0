// The public Messenger: argument checks and forwarding to the Impl; the error category;
// the ConnectionManager as the default source of streams.
#include "rmsg/messenger.h"

#include <limits>
#include <utility>

#include "msg/messenger_impl.h"

namespace rmsg {
namespace {

class MessengerCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rmsg.messenger"; }
  std::string message(int ev) const override {
    switch (static_cast<MessengerErrc>(ev)) {
      case MessengerErrc::peer_restarted:
        return "peer restarted its session";
      case MessengerErrc::session_unknown:
        return "peer does not know our session";
      case MessengerErrc::lossy_fault:
        return "lossy session lost its connection";
      case MessengerErrc::wrong_node:
        return "wrong node at that address";
      case MessengerErrc::handshake_timeout:
        return "handshake timed out";
      case MessengerErrc::unexpected_frame:
        return "unexpected frame";
      case MessengerErrc::sequence_gap:
        return "message sequence gap";
      case MessengerErrc::bad_ack:
        return "ack of a message never sent";
      case MessengerErrc::bad_payload:
        return "malformed control payload";
      case MessengerErrc::replaced:
        return "connection replaced";
      case MessengerErrc::peer_closed:
        return "peer closed the connection";
      case MessengerErrc::shutdown:
        return "messenger shut down";
      case MessengerErrc::idle_timeout:
        return "nothing received for idle_timeout";
      case MessengerErrc::bad_fragment:
        return "malformed fragment sequence";
    }
    return "unknown messenger error";
  }
};

class ManagerStreams final : public StreamFactory {
 public:
  explicit ManagerStreams(std::unique_ptr<ConnectionManager> cm) : cm_(std::move(cm)) {}
  void connect(const ConnectionParams& params, ConnectCallback done) override {
    cm_->connect(params, std::move(done));
  }
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept) override {
    return cm_->listen(address, params, std::move(on_accept));
  }

 private:
  std::unique_ptr<ConnectionManager> cm_;
};

}  // namespace

const std::error_category& messenger_category() noexcept {
  static const MessengerCategory category;
  return category;
}

Result<std::unique_ptr<StreamFactory>> make_manager_stream_factory(EventLoop& loop) {
  auto cm = ConnectionManager::create(loop);
  if (!cm) return cm.error();
  return std::unique_ptr<StreamFactory>(std::make_unique<ManagerStreams>(std::move(cm).value()));
}

Result<std::unique_ptr<Messenger>> MessengerAccess::create(EventLoop& loop,
                                                           const MessengerOptions& options,
                                                           std::unique_ptr<StreamFactory> streams,
                                                           Messenger::DispatchCallback dispatch,
                                                           Messenger::EventCallback on_event) {
  const MessengerOptions& o = options;
  if (o.node_id == 0 || !dispatch || !streams || o.max_message_size == 0 ||
      o.session_max_messages == 0 || o.total_max_messages == 0 || o.window_messages == 0 ||
      o.max_handshakes == 0 || o.ack_every == 0 || o.write_buffer == 0 ||
      o.max_message_size > std::numeric_limits<std::uint32_t>::max() - msg::MessageHeader::kSize) {
    return make_error_code(Errc::invalid_argument);
  }
  auto impl = std::make_shared<Messenger::Impl>(loop, options, std::move(streams),
                                                std::move(dispatch), std::move(on_event));
  return std::unique_ptr<Messenger>(new Messenger(std::move(impl)));
}

Result<std::unique_ptr<Messenger>> Messenger::create(EventLoop& loop,
                                                     const MessengerOptions& options,
                                                     DispatchCallback dispatch,
                                                     EventCallback on_event) {
  auto streams = make_manager_stream_factory(loop);
  if (!streams) return streams.error();
  return MessengerAccess::create(loop, options, std::move(streams).value(), std::move(dispatch),
                                 std::move(on_event));
}

Messenger::Messenger(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Messenger::~Messenger() {
  impl_->shutdown();
}

Result<std::string> Messenger::listen(const SocketAddress& address,
                                      const ConnectionParams& params) {
  return impl_->listen(address, params);
}
Result<void> Messenger::add_peer(NodeId peer, const ConnectionParams& params) {
  return impl_->add_peer(peer, params);
}
void Messenger::set_policy(NodeId peer, SessionPolicy policy) {
  impl_->set_policy(peer, policy);
}
Result<void> Messenger::send(NodeId peer, std::span<const std::byte> payload) {
  return impl_->send(peer, std::vector<std::byte>(payload.begin(), payload.end()));
}
Result<void> Messenger::send(NodeId peer, std::vector<std::byte> payload) {
  return impl_->send(peer, std::move(payload));
}
Result<Messenger::Ticket> Messenger::send_tracked(NodeId peer, std::vector<std::byte> payload) {
  return impl_->send_tracked(peer, std::move(payload), {});
}
Result<Messenger::Ticket> Messenger::send_tracked(NodeId peer, std::vector<std::byte> payload,
                                                  const SendOptions& options) {
  return impl_->send_tracked(peer, std::move(payload), options);
}
Result<void> Messenger::send(NodeId peer, std::vector<std::byte> payload,
                             const SendOptions& options) {
  auto r = impl_->send_tracked(peer, std::move(payload), options);
  if (!r) return r.error();
  return {};
}
bool Messenger::withdraw(NodeId peer, Ticket ticket) {
  return impl_->withdraw(peer, ticket);
}
void Messenger::shutdown(Clock::time_point deadline, std::function<void()> done) {
  impl_->drain(deadline, std::move(done));
}
void Messenger::mark_down(NodeId peer) {
  impl_->mark_down(peer);
}
std::optional<Messenger::SessionInfo> Messenger::session_info(NodeId peer) const {
  return impl_->session_info(peer);
}
NodeId Messenger::node_id() const noexcept {
  return impl_->node_id();
}
EventLoop& Messenger::loop() const noexcept {
  return impl_->loop();
}
const CounterSet& Messenger::counters() const noexcept {
  return impl_->counters();
}

}  // namespace rmsg
