#include "rdmacm/cm_channel.h"

#include <utility>

#include "rmsg/log.h"

namespace rmsg::rdmacm {

namespace {
constexpr char kServiceKey = 0;  // names the loop service (its address is the key)
}  // namespace

Result<std::shared_ptr<CmChannel>> CmChannel::for_loop(EventLoop& loop) {
  // A loop service, not a per-thread map: librdmacm queues the events of ids accepted by a
  // listener on the listener's channel, so the listener and every stream of one loop must
  // share the channel whichever thread made them before the loop ran.
  if (auto existing = loop.service(&kServiceKey)) {
    return std::static_pointer_cast<CmChannel>(existing);
  }
  auto channel = verbs::create_event_channel();
  if (!channel) return channel.error();
  std::shared_ptr<CmChannel> ch(new CmChannel(loop, std::move(channel).value()));
  const int fd = ch->channel_->fd;
  auto watch = loop.watch(fd, kReadable, [weak = std::weak_ptr<CmChannel>(ch)](std::uint32_t) {
    if (auto self = weak.lock()) self->drain();
  });
  if (!watch) return watch.error();
  ch->watch_ = watch.value();
  loop.set_service(&kServiceKey, ch);
  return ch;
}

CmChannel::CmChannel(EventLoop& loop, verbs::EventChannel channel)
    : loop_(loop), channel_(std::move(channel)) {}

CmChannel::~CmChannel() {
  loop_.unwatch(watch_);
  retired_.clear();
}

Result<verbs::CmId> CmChannel::create_id(CmEventHandler* handler) {
  auto id = verbs::create_id(channel_.get(), nullptr);
  if (id) attach(id->get(), handler);
  return id;
}

void CmChannel::attach(rdma_cm_id* id, CmEventHandler* handler) {
  handlers_[id] = handler;
}

void CmChannel::detach(rdma_cm_id* id) {
  handlers_.erase(id);
}

void CmChannel::retire(verbs::CmId id) {
  if (!id) return;
  detach(id.get());
  if (dispatching_) {
    retired_.push_back(std::move(id));
  } else {
    id.reset();
  }
}

void CmChannel::after_ack(std::function<void()> task) {
  if (dispatching_) {
    after_ack_.push_back(std::move(task));
  } else {
    task();
  }
}

std::uint64_t CmChannel::add_removal_observer(RemovalObserver observer) {
  removal_observers_.emplace(++next_observer_, std::move(observer));
  return next_observer_;
}

void CmChannel::remove_removal_observer(std::uint64_t token) {
  removal_observers_.erase(token);
}

void CmChannel::notify_removal(ibv_context* ctx) {
  if (ctx == nullptr) return;         // an id bound to no device (a wildcard listener)
  std::vector<std::uint64_t> tokens;  // an observer may remove itself or another
  for (const auto& [token, observer] : removal_observers_) tokens.push_back(token);
  for (const auto token : tokens) {
    auto it = removal_observers_.find(token);
    if (it == removal_observers_.end()) continue;
    auto observer = it->second;
    observer(ctx);
  }
}

namespace {

// librdmacm keeps a device context open for its ids and re-reads the device list only when
// asked for it (or when an id lands on a device it does not know): without this, a removed
// device stays open until the process exits, and its removal waits that long. Listing the
// devices marks the removed one dead; librdmacm closes it once its last id is destroyed.
// The caller's verbs objects on that device must be gone by then (the handlers of
// DEVICE_REMOVAL drop them).
void forget_removed_devices() {
  int count = 0;
  ibv_context** devices = rdma_get_devices(&count);
  if (devices != nullptr) rdma_free_devices(devices);
}

}  // namespace

void CmChannel::drain() {
  auto keep_alive = shared_from_this();  // a handler may drop the last other owner
  for (;;) {
    auto event = verbs::get_cm_event(channel_.get());
    if (!event) {
      if (!event.is(Errc::would_block)) {
        RMSG_LOG(error, "rdma_get_cm_event: %s", event.error().message().c_str());
      }
      return;
    }
    const rdma_cm_event& ev = *event.value().get();
    const bool request = ev.event == RDMA_CM_EVENT_CONNECT_REQUEST;
    auto it = handlers_.find(request ? ev.listen_id : ev.id);
    dispatching_ = true;
    if (it != handlers_.end()) {
      it->second->on_cm_event(ev);
    } else if (request) {
      // The listener is gone: refuse, and destroy the new id once the event is acked.
      rdma_reject(ev.id, nullptr, 0);
      retired_.emplace_back(ev.id);
    } else {
      RMSG_LOG(debug, "rdma_cm event %s for a detached id", rdma_event_str(ev.event));
    }
    const bool removal = ev.event == RDMA_CM_EVENT_DEVICE_REMOVAL;
    if (removal) notify_removal(ev.id->verbs);
    event.value().reset();  // ack
    dispatching_ = false;
    retired_.clear();
    if (removal) forget_removed_devices();
    for (auto& task : std::exchange(after_ack_, {})) task();
  }
}

}  // namespace rmsg::rdmacm
