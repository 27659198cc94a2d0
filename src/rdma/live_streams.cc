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
  const std::uint64_t id = next_++;
  streams_.emplace(id, stream);
  return id;
}

}  // namespace rmsg::rdma
