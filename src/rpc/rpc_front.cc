// RpcEndpoint::Front: the shards of an endpoint over N loops, their creation over an owned
// or an application's messenger, the routing to the shard of a peer or a call id, and
// the public RpcEndpoint forwarding to them (docs/messenger.md, RPC).
#include "rpc/rpc_front.h"

#include <atomic>
#include <utility>

#include "loop/loop_thread.h"
#include "msg/front_sync.h"
#include "rpc/rpc_seams.h"

namespace rmsg {
namespace {

bool valid(const RpcOptions& o, const MessengerOptions& m) {
  return o.max_outstanding != 0 && m.max_message_size > rpc::RpcHeader::kSize;
}

}  // namespace

void RpcEndpoint::Front::make_shards(std::span<EventLoop* const> loops, const RpcOptions& options,
                                     const Messenger::EventCallback& on_event) {
  for (std::size_t i = 0; i < loops.size(); ++i) {
    shards_.push_back(
        std::make_shared<Impl>(*loops[i], options, on_event, shared_, i, loops.size()));
    routes_->shards.push_back(shards_.back());
    shared_->shards.push_back(shards_.back());
  }
}

Messenger::DispatchCallback RpcEndpoint::Front::dispatch() {
  if (shards_.size() == 1) {
    // Held, not locked per message (two atomic operations each): the shard lives as long
    // as the messenger keeps this callback, and ignores messages once closed.
    std::shared_ptr<Impl> shard = shards_[0];
    return [shard](NodeId from, std::span<const std::byte> payload) {
      shard->on_message(from, payload);
    };
  }
  // Runs on the loop that owns `from` (the messenger dispatches on the session's loop).
  return [routes = routes_](NodeId from, std::span<const std::byte> payload) {
    if (auto self = routes->shards[routes->port.owner(from)].lock()) {
      self->on_message(from, payload);
    }
  };
}

Messenger::EventCallback RpcEndpoint::Front::events() {
  if (shards_.size() == 1) {
    std::weak_ptr<Impl> weak = shards_[0];
    return [weak](SessionEvent e) {
      if (auto self = weak.lock()) self->on_event(std::move(e));
    };
  }
  return [routes = routes_](SessionEvent e) {
    if (auto self = routes->shards[routes->port.owner(e.peer)].lock()) {
      self->on_event(std::move(e));
    }
  };
}

void RpcEndpoint::Front::bind(Messenger& messenger, ServiceId service) {
  messenger_ = &messenger;
  port_ = msg::MessengerPort(messenger, 0);
  routes_->port = port_;
  service_ = service;
  for (auto& s : shards_) s->start(messenger, service);
}

Result<std::unique_ptr<RpcEndpoint::Front>> RpcEndpoint::Front::create_owned(
    std::span<EventLoop* const> loops, const RpcOptions& options, const MakeStreams& make_streams,
    Messenger::EventCallback on_event) {
  if (!valid(options, options.messenger) || loops.empty()) {
    return make_error_code(Errc::invalid_argument);
  }
  for (EventLoop* l : loops) {
    if (l == nullptr) return make_error_code(Errc::invalid_argument);
  }
  auto front = std::make_unique<Front>();
  front->make_shards(loops, options, on_event);
  auto m = msg::MessengerPort::create(loops, options.messenger, make_streams, front->dispatch(),
                                      front->events());
  if (!m) return m.error();
  front->owned_ = std::move(m).value();
  front->bind(*front->owned_, 0);
  return front;
}

Result<std::unique_ptr<RpcEndpoint::Front>> RpcEndpoint::Front::create_attached(
    Messenger& messenger, ServiceId service, const RpcOptions& options,
    Messenger::EventCallback on_event) {
  if (!valid(options, messenger.options())) return make_error_code(Errc::invalid_argument);
  RpcOptions o = options;
  o.messenger = messenger.options();
  std::vector<EventLoop*> loops;
  for (std::size_t i = 0; i < messenger.loop_count(); ++i) {
    loops.push_back(&msg::MessengerPort(messenger, i).loop());
  }
  auto front = std::make_unique<Front>();
  front->make_shards(loops, o, on_event);
  front->bind(messenger, service);  // before attach: its callbacks may run at once
  RMSG_TRY(messenger.attach(service, front->dispatch(), front->events()));
  front->attached_ = true;
  return front;
}

RpcEndpoint::Front::~Front() {
  // Calls from callbacks on other loops are refused from now on; then each shard closes on
  // its loop (its calls complete there), with the messenger still whole.
  for (auto& s : shards_) s->shut_ = true;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    wait_on(i, [this, i] { shards_[i]->close(); });
  }
  if (owned_) {
    owned_.reset();
  } else if (attached_) {
    messenger_->detach(service_);  // what still reaches a closed shard is dropped
  }
  shards_.clear();
}

void RpcEndpoint::Front::wait_on(std::size_t i, const std::function<void()>& f) {
  msg::wait_on_loop(shards_[i]->loop_, f);
}

void RpcEndpoint::Front::run_on(std::size_t i, std::function<void(Impl&)> f) {
  msg::run_on_loop(shards_[i]->loop_, std::move(f), shards_[i]);
}

bool RpcEndpoint::Front::cancel(CallId id) {
  if (id == 0) return false;
  Impl& s = shard_of_call(id);
  if (loop::Access::owned_here(s.loop_)) return s.cancel(id);
  return s.cancel_any_thread(id);
}

void RpcEndpoint::Front::handle(std::uint32_t method, const Handler& handler,
                                MethodOptions options) {
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    run_on(i, [method, handler, options](Impl& s) {
      s.set_method(method, Impl::Method{handler, options});
    });
  }
}

void RpcEndpoint::Front::handle_oneway(std::uint32_t method, const OnewayHandler& handler) {
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    run_on(i, [method, handler](Impl& s) { s.set_oneway(method, handler); });
  }
}

void RpcEndpoint::Front::shutdown() {
  for (auto& s : shards_) s->shut_ = true;  // call() refuses from now on, on every thread
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    run_on(i, [](Impl& s) { s.shutdown(); });
  }
}

void RpcEndpoint::Front::drain(Clock::time_point deadline, std::function<void()> done) {
  for (auto& s : shards_) s->shut_ = true;
  // Every shard drains on its loop; after the last, the owned messenger drains its queues
  // (replies included) until the same deadline. One shared with other users is theirs.
  Messenger* owned = owned_.get();  // alive while a shard is: the destructor closes them first
  auto one_drained =
      msg::after_all(shards_.size(), [deadline, owned, done = std::move(done)]() mutable {
        if (owned != nullptr) return owned->shutdown(deadline, std::move(done));
        if (done) done();
      });
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    run_on(i, [deadline, one_drained](Impl& s) { s.drain(deadline, one_drained); });
  }
}

// ---- RpcEndpoint ----

Result<std::unique_ptr<RpcEndpoint>> RpcAccess::create(EventLoop& loop, const RpcOptions& options,
                                                       std::unique_ptr<StreamFactory> streams,
                                                       Messenger::EventCallback on_event) {
  if (!streams) return make_error_code(Errc::invalid_argument);
  auto given = std::make_shared<std::unique_ptr<StreamFactory>>(std::move(streams));
  EventLoop* const loops[] = {&loop};
  auto f = RpcEndpoint::Front::create_owned(
      loops, options,
      [given](EventLoop&) -> Result<std::unique_ptr<StreamFactory>> { return std::move(*given); },
      std::move(on_event));
  if (!f) return f.error();
  return RpcEndpoint::Front::wrap(std::move(f).value());
}

RpcAccess::PeerState RpcAccess::peer_state(const RpcEndpoint& ep) {
  PeerState st;
  for (const auto& s : RpcEndpoint::Front::of(ep).shards_) {
    st.peers += s->peers_.size();
    st.dedupe += s->dedupe_.size();
    st.pending += s->pending_.size();
  }
  return st;
}

Result<std::unique_ptr<RpcEndpoint>> RpcEndpoint::create(EventLoop& loop, const RpcOptions& options,
                                                         Messenger::EventCallback on_event) {
  EventLoop* const loops[] = {&loop};
  return create(loops, options, std::move(on_event));
}

Result<std::unique_ptr<RpcEndpoint>> RpcEndpoint::create(std::span<EventLoop* const> loops,
                                                         const RpcOptions& options,
                                                         Messenger::EventCallback on_event) {
  auto f =
      Front::create_owned(loops, options, manager_streams(options.messenger), std::move(on_event));
  if (!f) return f.error();
  return std::unique_ptr<RpcEndpoint>(new RpcEndpoint(std::move(f).value()));
}

Result<std::unique_ptr<RpcEndpoint>> RpcEndpoint::create(Messenger& messenger, ServiceId service,
                                                         const RpcOptions& options,
                                                         Messenger::EventCallback on_event) {
  auto f = Front::create_attached(messenger, service, options, std::move(on_event));
  if (!f) return f.error();
  return std::unique_ptr<RpcEndpoint>(new RpcEndpoint(std::move(f).value()));
}

RpcEndpoint::RpcEndpoint(std::unique_ptr<Front> front) : front_(std::move(front)) {}
RpcEndpoint::~RpcEndpoint() = default;

Messenger& RpcEndpoint::messenger() noexcept {
  return *front_->messenger_;
}
void RpcEndpoint::handle(std::uint32_t method, Handler handler, MethodOptions options) {
  front_->handle(method, handler, options);
}
void RpcEndpoint::handle_oneway(std::uint32_t method, OnewayHandler handler) {
  front_->handle_oneway(method, handler);
}
Result<CallId> RpcEndpoint::call(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                                 const CallOptions& options, CallCallback done) {
  Impl& s = front_->shard_of(peer);
  const bool has_deadline = options.deadline != Clock::time_point{};
  const bool has_timeout = options.timeout != Duration::zero();
  if (has_deadline == has_timeout) return make_error_code(Errc::invalid_argument);
  CallOptions o = options;
  // The peer's loop keeps the call's deadline: its clock (a ManualClock in tests) counts.
  if (has_timeout) o.deadline = s.loop_.now() + options.timeout;
  if (loop::Access::owned_here(s.loop_)) return s.call(peer, method, body, o, std::move(done));
  return s.call_any_thread(peer, method, body, o, std::move(done));
}
Result<CallId> RpcEndpoint::call(NodeId peer, std::uint32_t method, std::span<const std::byte> body,
                                 Duration timeout, CallCallback done) {
  return call(peer, method, body, CallOptions{.timeout = timeout}, std::move(done));
}
bool RpcEndpoint::cancel(CallId id) {
  return front_->cancel(id);
}
Result<void> RpcEndpoint::notify(NodeId peer, std::uint32_t method,
                                 std::span<const std::byte> body) {
  return front_->shard_of(peer).notify(peer, method, body);
}
void RpcEndpoint::shutdown(Clock::time_point deadline, std::function<void()> done) {
  front_->drain(deadline, std::move(done));
}
void RpcEndpoint::shutdown() {
  front_->shutdown();
}
std::optional<RpcPeerStats> RpcEndpoint::peer_stats(NodeId peer) const {
  RMSG_ASSERT_LOOP_THREAD(front_->shard_of(peer).loop_);
  return front_->shard_of(peer).peer_stats(peer);
}
const CounterSet& RpcEndpoint::counters() const noexcept {
  return front_->shared_->counters;
}

}  // namespace rmsg
