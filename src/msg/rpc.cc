// The public RpcEndpoint: creation over a Messenger, forwarding to the Impl, the error
// category; demultiplexing of messages and session events; per-peer counters.
#include <string>
#include <utility>

#include "msg/rpc_impl.h"
#include "msg/rpc_seams.h"

namespace rmsg {
namespace {

class RpcCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rmsg.rpc"; }
  std::string message(int ev) const override {
    switch (static_cast<RpcErrc>(ev)) {
      case RpcErrc::handler_error:
        return "rpc handler error";
      case RpcErrc::unknown_method:
        return "rpc unknown method";
      case RpcErrc::too_large:
        return "rpc request too large";
      case RpcErrc::shutting_down:
        return "rpc endpoint shutting down";
      case RpcErrc::timeout:
        return "rpc deadline passed";
      case RpcErrc::cancelled:
        return "rpc call cancelled";
      case RpcErrc::session_reset:
        return "rpc session reset (the call may or may not have run)";
    }
    return "unknown rpc error";
  }
};

}  // namespace

const std::error_category& rpc_category() noexcept {
  static const RpcCategory category;
  return category;
}

RpcEndpoint::Impl::Impl(EventLoop& loop, const RpcOptions& options,
                        Messenger::EventCallback on_event)
    : loop_(loop),
      options_(options),
      on_event_(std::move(on_event)),
      dedupe_(options.dedupe_entries) {}

Result<void> RpcEndpoint::Impl::start(std::unique_ptr<StreamFactory> streams) {
  std::weak_ptr<Impl> weak = weak_from_this();
  auto m = MessengerAccess::create(
      loop_, options_.messenger, std::move(streams),
      [weak](NodeId from, std::span<const std::byte> payload) {
        if (auto self = weak.lock()) self->on_message(from, payload);
      },
      [weak](SessionEvent e) {
        if (auto self = weak.lock()) self->on_event(std::move(e));
      });
  if (!m) return m.error();
  owned_ = std::move(m).value();
  messenger_ = owned_.get();
  return {};
}

Result<void> RpcEndpoint::Impl::start(Messenger& messenger, ServiceId service) {
  std::weak_ptr<Impl> weak = weak_from_this();
  RMSG_TRY(messenger.attach(
      service,
      [weak](NodeId from, std::span<const std::byte> payload) {
        if (auto self = weak.lock()) self->on_message(from, payload);
      },
      [weak](SessionEvent e) {
        if (auto self = weak.lock()) self->on_event(std::move(e));
      }));
  messenger_ = &messenger;
  service_ = service;
  return {};
}

void RpcEndpoint::Impl::close() {
  shut_ = true;
  fail_calls(0, make_error_code(RpcErrc::shutting_down));
  if (deadline_timer_ != 0) loop_.cancel_timer(deadline_timer_);
  deadline_timer_ = 0;
  for (auto& [key, weak] : pending_) {
    if (auto st = weak.lock()) st->endpoint.reset();
  }
  pending_.clear();
  if (!owned_ && messenger_ != nullptr) messenger_->detach(service_);
  messenger_ = nullptr;
  owned_.reset();
}

void RpcEndpoint::Impl::on_message(NodeId from, std::span<const std::byte> payload) {
  // An empty message is a request the caller withdrew (Messenger::withdraw).
  if (payload.empty()) {
    counters_.counter("rpc.withdrawn_seen").add_owned();
    return;
  }
  const auto h = msg::decode_rpc(payload);
  if (!h) {
    counters_.counter("rpc.bad_messages").add_owned();
    return;
  }
  const auto body = payload.subspan(msg::RpcHeader::kSize);
  switch (h->kind) {
    case msg::RpcKind::request:
      on_request(from, *h, body);
      break;
    case msg::RpcKind::reply:
      on_reply(from, *h, body);
      break;
    case msg::RpcKind::cancel:
      on_cancel(from, h->id);
      break;
    case msg::RpcKind::oneway:
      on_oneway(from, *h, body);
      break;
  }
}

void RpcEndpoint::Impl::on_event(SessionEvent event) {
  if (event.kind == SessionEvent::Kind::reset) {
    fail_calls(event.peer, make_error_code(RpcErrc::session_reset));
    drop_pending(event.peer);
    if (event.error == make_error_code(MessengerErrc::peer_restarted)) dedupe_.forget(event.peer);
  }
  if (on_event_) on_event_(std::move(event));
}

// The requests of a session that ended: their replies must not reach the next session,
// whose calls the peer numbers afresh (a restarted peer reuses the ids).
void RpcEndpoint::Impl::drop_pending(NodeId peer) {
  auto it = pending_.lower_bound({peer, 0});
  while (it != pending_.end() && it->first.first == peer) {
    if (auto st = it->second.lock()) st->cancelled = true;
    it = pending_.erase(it);
    count_pending(peer, -1);
  }
}

RpcEndpoint::Impl::PeerCounters& RpcEndpoint::Impl::peer_counters(NodeId node) {
  auto it = peers_.find(node);
  if (it != peers_.end()) return it->second;
  const std::string p = "rpc.peer." + std::to_string(node) + ".";
  PeerCounters c;
  c.calls = &counters_.counter(p + "calls");
  c.ok = &counters_.counter(p + "ok");
  c.failed = &counters_.counter(p + "failed");
  c.timeouts = &counters_.counter(p + "timeouts");
  c.cancelled = &counters_.counter(p + "cancelled");
  c.served = &counters_.counter(p + "served");
  c.oneway_sent = &counters_.counter(p + "oneway_sent");
  c.oneway_received = &counters_.counter(p + "oneway_received");
  c.latency = &counters_.histogram(p + "call_ns");
  return peers_.emplace(node, c).first->second;
}

std::optional<RpcPeerStats> RpcEndpoint::Impl::peer_stats(NodeId node) const {
  auto it = peers_.find(node);
  if (it == peers_.end()) return std::nullopt;
  const PeerCounters& c = it->second;
  return RpcPeerStats{
      c.calls->value(),     c.ok->value(),     c.failed->value(),      c.timeouts->value(),
      c.cancelled->value(), c.served->value(), c.oneway_sent->value(), c.oneway_received->value(),
      c.outstanding,        c.latency};
}

Result<std::unique_ptr<RpcEndpoint>> RpcAccess::create(EventLoop& loop, const RpcOptions& options,
                                                       std::unique_ptr<StreamFactory> streams,
                                                       Messenger::EventCallback on_event) {
  if (options.max_outstanding == 0 || options.messenger.max_message_size <= msg::RpcHeader::kSize) {
    return make_error_code(Errc::invalid_argument);
  }
  auto impl = std::make_shared<RpcEndpoint::Impl>(loop, options, std::move(on_event));
  RMSG_TRY(impl->start(std::move(streams)));
  return std::unique_ptr<RpcEndpoint>(new RpcEndpoint(std::move(impl)));
}

Result<std::unique_ptr<RpcEndpoint>> RpcEndpoint::create(EventLoop& loop, const RpcOptions& options,
                                                         Messenger::EventCallback on_event) {
  auto streams = make_manager_stream_factory(loop);
  if (!streams) return streams.error();
  return RpcAccess::create(loop, options, std::move(streams).value(), std::move(on_event));
}

Result<std::unique_ptr<RpcEndpoint>> RpcEndpoint::create(Messenger& messenger, ServiceId service,
                                                         const RpcOptions& options,
                                                         Messenger::EventCallback on_event) {
  // The endpoint's state lives on one loop: a messenger over several is not served yet.
  if (messenger.loop_count() != 1 || options.max_outstanding == 0 ||
      messenger.options().max_message_size <= msg::RpcHeader::kSize) {
    return make_error_code(Errc::invalid_argument);
  }
  RpcOptions o = options;
  o.messenger = messenger.options();
  auto impl = std::make_shared<RpcEndpoint::Impl>(messenger.loop(), o, std::move(on_event));
  RMSG_TRY(impl->start(messenger, service));
  return std::unique_ptr<RpcEndpoint>(new RpcEndpoint(std::move(impl)));
}

RpcEndpoint::RpcEndpoint(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
RpcEndpoint::~RpcEndpoint() {
  impl_->close();
}
Messenger& RpcEndpoint::messenger() noexcept {
  return *impl_->messenger_;
}
void RpcEndpoint::handle(std::uint32_t method, Handler handler, MethodOptions options) {
  impl_->methods_[method] = Impl::Method{std::move(handler), options};
}
void RpcEndpoint::handle_oneway(std::uint32_t method, OnewayHandler handler) {
  impl_->oneway_[method] = std::move(handler);
}
Result<CallId> RpcEndpoint::call(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                                 const CallOptions& options, CallCallback done) {
  return impl_->call(peer, method, body, options, std::move(done));
}
bool RpcEndpoint::cancel(CallId id) {
  return impl_->cancel(id);
}
Result<void> RpcEndpoint::notify(NodeId peer, std::uint32_t method,
                                 std::span<const std::byte> body) {
  return impl_->notify(peer, method, body);
}
void RpcEndpoint::shutdown(Clock::time_point deadline, std::function<void()> done) {
  impl_->drain(deadline, std::move(done));
}
void RpcEndpoint::shutdown() {
  impl_->shutdown();
}
std::optional<RpcPeerStats> RpcEndpoint::peer_stats(NodeId peer) const {
  return impl_->peer_stats(peer);
}
const CounterSet& RpcEndpoint::counters() const noexcept {
  return impl_->counters_;
}

}  // namespace rmsg
