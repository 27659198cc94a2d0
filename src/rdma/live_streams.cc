// LiveStreams: see live_streams.h.
#include "rdma/live_streams.h"

namespace rmsg::rdma {
namespace {

const char kServiceKey = 0;

}  // namespace

std::shared_ptr<LiveStreams> LiveStreams::of(EventLoop& loop) {
  auto found = std::static_pointer_cast<LiveStreams>(loop.service(&kServiceKey));
  if (found) return found;
  auto made = std::make_shared<LiveStreams>();
  loop.set_service(&kServiceKey, made);
  return made;
}

std::uint64_t LiveStreams::add(RdmaStream* stream) {
  std::uint32_t index;
  if (free_.empty()) {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    index = free_.back();
    free_.pop_back();
  }
  Slot& s = slots_[index];
  s.stream = stream;
  return (std::uint64_t{s.generation} << 32) | index;
}

void LiveStreams::remove(std::uint64_t id) noexcept {
  if (find(id) == nullptr) return;
  Slot& s = slots_[static_cast<std::uint32_t>(id)];
  s.stream = nullptr;
  // Never generation 0: with index 0 that would make the number 0.
  s.generation = s.generation == UINT32_MAX ? 1 : s.generation + 1;
  free_.push_back(static_cast<std::uint32_t>(id));
}

}  // namespace rmsg::rdma
