// NestedScratch<N>: a thread's scratch buffer of N bytes for a call that may re-enter
// itself, as a read callback does when a callback inside it runs the event loop: each
// nesting depth of the calling thread gets a buffer of its own, so a nested call never
// overwrites bytes that an outer call still decodes. Depth 0 is the common case and costs
// what a `static thread_local` array would, plus a counter; a deeper buffer is allocated on
// first use at that depth and kept for the thread's life.
//
// Threading: the calling thread's; an object lives on the stack of the call it serves.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace rmsg {

template <std::size_t N>
class NestedScratch {
 public:
  NestedScratch() {
    State& s = state();
    if (s.depth == s.buffers.size()) s.buffers.push_back(std::make_unique<Buffer>());
    buffer_ = s.buffers[s.depth++].get();
  }
  NestedScratch(const NestedScratch&) = delete;
  NestedScratch& operator=(const NestedScratch&) = delete;
  NestedScratch(NestedScratch&&) = delete;
  NestedScratch& operator=(NestedScratch&&) = delete;
  ~NestedScratch() { --state().depth; }

  std::span<std::byte> span() const noexcept { return *buffer_; }

 private:
  using Buffer = std::array<std::byte, N>;
  struct State {
    std::size_t depth = 0;
    std::vector<std::unique_ptr<Buffer>> buffers;  // [depth]: that depth's buffer
  };
  static State& state() {
    static thread_local State s;
    return s;
  }
  Buffer* buffer_;
};

}  // namespace rmsg
