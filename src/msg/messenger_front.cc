// Messenger::Front: the shards of a messenger over N loops, and the handoff of sends and
// accepted connections to the loop that owns a peer (docs/messenger.md, Threading).
#include "msg/messenger_front.h"

#include <limits>
#include <utility>

#include "loop/loop_thread.h"
#include "msg/front_sync.h"
#include "msg/vocabulary.h"
#include "session/in_state.h"

namespace rmsg {
namespace {

bool valid(const MessengerOptions& o) {
  // A window wider than what a receiver delivers ahead of in_seq (InState::kMaxAhead) lets
  // priority messages outrun it: a sequence gap, a reconnect and the same again.
  if (o.window_messages > msg::kMaxAhead) return false;
  return o.node_id != 0 && o.max_message_size != 0 && o.session_max_messages != 0 &&
         o.total_max_messages != 0 && o.window_messages != 0 && o.max_handshakes != 0 &&
         o.ack_every != 0 && o.write_buffer != 0 &&
         o.max_message_size <=
             std::numeric_limits<std::uint32_t>::max() - msg::MessageHeader::kSize;
}

// splitmix64's finaliser: node ids are often small consecutive numbers; mixed, they spread
// over the loops evenly.
std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

Messenger::Front::Front(const MessengerOptions& options)
    : options_(options),
      admission_(std::make_shared<msg::Admission>(
          msg::QueueLimits{options.session_max_messages, options.session_max_bytes,
                           options.window_messages, options.window_bytes, options.fragment_size},
          options.total_max_messages, options.total_max_bytes)) {}

Result<std::unique_ptr<Messenger::Front>> Messenger::Front::create(
    std::span<EventLoop* const> loops, const MessengerOptions& options,
    const MakeStreams& make_streams, DispatchCallback dispatch, EventCallback on_event) {
  if (!valid(options) || !dispatch || loops.empty()) return make_error_code(Errc::invalid_argument);
  for (EventLoop* l : loops) {
    if (l == nullptr) return make_error_code(Errc::invalid_argument);
  }
  auto front = std::make_unique<Front>(options);
  for (EventLoop* l : loops) {
    auto streams = make_streams(*l);
    if (!streams) return streams.error();
    if (!streams.value()) return make_error_code(Errc::invalid_argument);
    streams.value()->set_affinity(options.node_id);
    StreamFactory* factory = streams.value().get();
    // The table is made before the shard so that its counter lives in the shard's set.
    auto holder = std::make_shared<std::shared_ptr<msg::ServiceTable>>();
    auto impl = std::make_shared<Messenger::Impl>(
        *l, options, std::move(streams).value(),
        [holder](NodeId from, std::uint16_t service, std::span<const std::byte> payload) {
          (*holder)->dispatch(from, service, payload);
        },
        [holder](ShardEvent e) { (*holder)->event(std::move(e)); }, front->admission_);
    *holder = std::make_shared<msg::ServiceTable>(
        impl->counters().counter("msg.unknown_service"),
        [f = front.get()](ServiceId service) { return f->attached_user(service); });
    (*holder)->attach(0, {dispatch, on_event});
    factory->set_counters(impl->counters());
    if (auto r = impl->init_auth(); !r) return r.error();  // the key files (session_auth.cc)
    front->shards_.push_back(Shard{l, std::move(impl), *holder});
  }
  front->sweep_pending_ = std::make_unique<std::atomic<bool>[]>(front->shards_.size());
  if (front->shards_.size() > 1) {
    Front* f = front.get();
    for (std::size_t i = 0; i < f->shards_.size(); ++i) {
      f->shards_[i].impl->set_front_hooks({
          .on_total_room = [f, i] { f->total_room(i); },
          .owns = [f, i](NodeId peer) { return f->owner(peer) == i; },
          .owner_loop = [f](NodeId peer) -> EventLoop& { return *f->shards_[f->owner(peer)].loop; },
          .to_owner = [f](NodeId peer, Stream s, Transport t) { f->relay(peer, std::move(s), t); },
      });
    }
  }
  return front;
}

Messenger::Front::~Front() {
  // First every shard shuts down on its loop, while callbacks on the other loops may still
  // call into the front (the shards stay in place); then, none of them running any more,
  // each lets go of its parts on its own loop.
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    wait_on(i, [this, i] { shards_[i].impl->shutdown(); });
  }
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    wait_on(i, [this, i] {
      shards_[i].impl.reset();
      shards_[i].services.reset();
    });
  }
}

void Messenger::Front::wait_on(std::size_t i, const std::function<void()>& f) {
  msg::wait_on_loop(*shards_[i].loop, f);
}

std::size_t Messenger::Front::owner(NodeId peer) const noexcept {
  return shards_.size() == 1 ? 0 : static_cast<std::size_t>(mix(peer) % shards_.size());
}

void Messenger::Front::run_on(std::size_t i, ShardTask f) {
  const Shard& sh = shards_[i];
  msg::run_on_loop(*sh.loop, std::move(f), sh.impl, sh.services);
}

Result<void> Messenger::Front::send(NodeId peer, std::vector<std::byte> payload,
                                    ServiceId service) {
  return send_tracked(peer, std::move(payload), Messenger::SendOptions{.service = service}, {});
}

Result<void> Messenger::Front::send(NodeId peer, std::vector<std::byte> payload,
                                    const Messenger::SendOptions& options) {
  return send_tracked(peer, std::move(payload), options, {});
}

Result<void> Messenger::Front::send_tracked(NodeId peer, std::vector<std::byte> payload,
                                            const Messenger::SendOptions& options, Queued queued,
                                            bool draining_ok) {
  if (peer == 0 || peer == options_.node_id || payload.size() > options_.max_message_size) {
    return make_error_code(Errc::invalid_argument);
  }
  Shard& sh = shard_of(peer);
  if (loop::Access::owned_here(*sh.loop)) {
    auto t = sh.impl->send_tracked(peer, std::move(payload), options, draining_ok);
    if (!t) return t.error();
    if (queued) queued(t.value());
    return {};
  }
  if (!draining_ok && draining_.load(std::memory_order_acquire)) {
    return make_error_code(Errc::closed);
  }
  const std::size_t n = payload.size();
  bool episode_started = false;
  if (!admission_->try_reserve(peer, n, &episode_started)) {
    // The same episode as a refusal on the loop: SessionEvent::writable follows there. The
    // owner hears of it (once per episode): a peer with no session there yet is in no
    // session's sweep, and the room may have come before the refusal was noted.
    sh.impl->counters().counter("msg.send_refused").add();
    if (episode_started) {
      run_on(owner(peer), [peer](Impl& s, msg::ServiceTable&) { s.refused_elsewhere(peer); });
    }
    return make_error_code(Errc::resource_exhausted);
  }
  std::weak_ptr<Messenger::Impl> weak = sh.impl;
  std::shared_ptr<msg::Admission> admission = admission_;
  sh.loop->post([weak, admission, peer, options, p = std::move(payload),
                 queued = std::move(queued)]() mutable {
    auto self = weak.lock();
    if (!self) return admission->release(peer, p.size());
    auto t = self->send_reserved(peer, std::move(p), options);
    if (t && queued) queued(*t);
  });
  return {};
}

void Messenger::Front::total_room(std::size_t from) {
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    if (i == from || sweep_pending_[i].exchange(true, std::memory_order_acq_rel)) continue;
    run_on(i, [this, i](Impl& s, msg::ServiceTable&) {
      sweep_pending_[i].store(false, std::memory_order_release);
      s.sweep_writable();
    });
  }
}

Result<void> Messenger::Front::attach(ServiceId service, DispatchCallback dispatch,
                                      EventCallback on_event) {
  if (service == 0 || !dispatch) return make_error_code(Errc::invalid_argument);
  {
    const std::lock_guard lock(services_mu_);
    if (!attached_.emplace(service, msg::ServiceTable::User{dispatch, on_event}).second) {
      return make_error_code(Errc::invalid_argument);
    }
  }
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    run_on(i, [service, dispatch, on_event](Impl&, msg::ServiceTable& services) {
      services.attach(service, {dispatch, on_event});
    });
  }
  return {};
}

std::optional<msg::ServiceTable::User> Messenger::Front::attached_user(ServiceId service) {
  const std::lock_guard lock(services_mu_);
  auto it = attached_.find(service);
  if (it == attached_.end()) return std::nullopt;
  return it->second;
}

void Messenger::Front::detach(ServiceId service) {
  if (service == 0) return;
  {
    const std::lock_guard lock(services_mu_);
    attached_.erase(service);
  }
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    run_on(i, [service](Impl&, msg::ServiceTable& services) { services.detach(service); });
  }
}

Result<std::string> Messenger::Front::listen(const SocketAddress& address,
                                             const ConnectionParams& params) {
  if (shards_.size() == 1) return shards_[0].impl->listen(address, params);
  return listen_routed(address, params);
}

Result<std::string> Messenger::Front::listen_routed(const SocketAddress& address,
                                                    const ConnectionParams& params) {
  std::vector<StreamFactory*> factories;
  std::vector<AcceptCallback> accepted;
  for (Shard& sh : shards_) {
    factories.push_back(&sh.impl->streams());
    std::weak_ptr<Messenger::Impl> weak = sh.impl;
    accepted.emplace_back([weak, transport = params.transport](Stream s) {
      if (auto self = weak.lock()) self->on_accepted(std::move(s), transport);
    });
  }
  auto l = shards_[0].impl->streams().listen_routed(
      address, params, factories, [this](std::uint64_t affinity) { return owner(affinity); },
      std::move(accepted));
  if (!l) return l.error();
  std::string bound = l.value().local_address();
  shards_[0].impl->keep_listener(std::move(l).value());
  return bound;
}

void Messenger::Front::relay(NodeId peer, Stream stream, Transport transport) {
  // Posted even to this loop: the owner's handshake starts outside the hello's handling.
  Shard& sh = shards_[owner(peer)];
  std::weak_ptr<Messenger::Impl> weak = sh.impl;
  auto held = std::make_shared<Stream>(std::move(stream));
  sh.loop->post([weak, held, transport] {
    if (auto self = weak.lock()) self->on_accepted(std::move(*held), transport);
  });
}

}  // namespace rmsg
