// LiveStreams: a loop's RDMA streams by number, so that a task deferred for one (its
// readiness pass, stream_readiness.cc) names it by a number and finds out whether it is
// still there. Not a weak_ptr in the task: std::function keeps a callable inline only
// when it is trivially copyable, so a lambda holding one cost a malloc and a free per
// notification (callgrind in the guest: with run_deferred's batch, ~600 of the stream's
// 7,055 user-space instructions per round trip went to malloc and free).
//
// A number is a slot and that slot's generation: finding a stream is an index and a
// compare (it runs once per readiness pass and after each callback), and a number is not
// given out again until its slot was reused 2^32 times. 0 is never a number.
//
// Ownership: a per-loop service (EventLoop::set_service), also held by each stream, so a
// stream destroyed after its loop still finds it.
// Threading: the loop thread (streams made before the loop runs: any one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "rmsg/event_loop.h"

namespace rmsg::rdma {

class RdmaStream;

class LiveStreams {
 public:
  static std::shared_ptr<LiveStreams> of(EventLoop& loop);

  std::uint64_t add(RdmaStream* stream);
  void remove(std::uint64_t id) noexcept;
  RdmaStream* find(std::uint64_t id) const noexcept {
    const auto index = static_cast<std::uint32_t>(id);
    if (index >= slots_.size()) return nullptr;
    const Slot& s = slots_[index];
    return s.generation == static_cast<std::uint32_t>(id >> 32) ? s.stream : nullptr;
  }

 private:
  struct Slot {
    RdmaStream* stream = nullptr;
    std::uint32_t generation = 1;  // of the number held now, or of the next one
  };
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;  // slots without a stream
};

}  // namespace rmsg::rdma
