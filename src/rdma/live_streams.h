// LiveStreams: a loop's RDMA streams by number, so that a task deferred for one (its
// readiness pass, stream_readiness.cc) names it by a number and finds out whether it is
// still there. Not a weak_ptr in the task: std::function keeps a callable inline only
// when it is trivially copyable, so a lambda holding one cost a malloc and a free per
// notification (callgrind in the guest: with run_deferred's batch, ~600 of the stream's
// 7,055 user-space instructions per round trip went to malloc and free).
//
// Ownership: a per-loop service (EventLoop::set_service), also held by each stream, so a
// stream destroyed after its loop still finds it. Numbers are never reused.
// Threading: the loop thread (streams made before the loop runs: any one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "rmsg/event_loop.h"

namespace rmsg::rdma {

class RdmaStream;

class LiveStreams {
 public:
  static std::shared_ptr<LiveStreams> of(EventLoop& loop);

  std::uint64_t add(RdmaStream* stream);
  void remove(std::uint64_t id) noexcept { streams_.erase(id); }
  RdmaStream* find(std::uint64_t id) const noexcept {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<std::uint64_t, RdmaStream*> streams_;
  std::uint64_t next_ = 1;
};

}  // namespace rmsg::rdma
