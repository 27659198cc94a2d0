// CompletionChannel: see completion_channel.h.
#include "rdma/completion_channel.h"

#include <map>

#include "rmsg/log.h"

namespace rmsg::rdma {
namespace {

const char kServiceKey = 0;

}  // namespace

class CompletionChannel::Registry {
 public:
  explicit Registry(EventLoop& loop) : loop_(loop) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  Registry(Registry&&) = delete;
  Registry& operator=(Registry&&) = delete;
  // The loop is going: its channels still held by structures stop being watched now.
  ~Registry() {
    for (auto& [ctx, weak] : channels_) {
      if (auto ch = weak.lock()) loop_.unwatch(std::exchange(ch->watch_, 0));
    }
  }

  EventLoop& loop() const noexcept { return loop_; }
  std::map<ibv_context*, std::weak_ptr<CompletionChannel>>& channels() { return channels_; }

 private:
  EventLoop& loop_;
  std::map<ibv_context*, std::weak_ptr<CompletionChannel>> channels_;
};

Result<std::shared_ptr<CompletionChannel>> CompletionChannel::for_loop(EventLoop& loop,
                                                                       ibv_context* ctx) {
  auto registry = std::static_pointer_cast<Registry>(loop.service(&kServiceKey));
  if (!registry) {
    registry = std::make_shared<Registry>(loop);
    loop.set_service(&kServiceKey, registry);
  }
  auto& slot = registry->channels()[ctx];
  if (auto existing = slot.lock()) return existing;
  auto made = verbs::create_comp_channel(ctx);
  if (!made) return made.error();
  std::shared_ptr<CompletionChannel> ch(new CompletionChannel(registry, std::move(made).value()));
  // The watch holds a plain pointer: the channel unwatches before it closes.
  auto watch = loop.watch(ch->channel_->fd, kReadable,
                          [raw = ch.get()](std::uint32_t) { raw->on_readable(); });
  if (!watch) return watch.error();
  ch->watch_ = watch.value();
  slot = ch;
  RMSG_LOG(debug, "rdma: completion channel fd %d for %s", ch->channel_->fd,
           ibv_get_device_name(ctx->device));
  return ch;
}

CompletionChannel::~CompletionChannel() {
  if (auto registry = registry_.lock()) {
    registry->loop().unwatch(std::exchange(watch_, 0));
    // Our entry is expired now (a newer channel for the device would have replaced it).
    std::erase_if(registry->channels(), [](const auto& e) { return e.second.expired(); });
  }
}

void CompletionChannel::on_readable() {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  if (ibv_get_cq_event(channel_.get(), &cq, &ctx) != 0) return;  // EAGAIN: taken already
  auto* sink = static_cast<CqEventSink*>(ctx);
  if (sink != nullptr && sink->on_event) {
    sink->on_event();  // counts the event for acking
  } else {
    ibv_ack_cq_events(cq, 1);
  }
}

}  // namespace rmsg::rdma
