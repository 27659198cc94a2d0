// Fault injection for resource creation (verbs/seams.h): a test hook, compiled into
// rmsg_testhooks only. Linked into a program, it installs itself as the verbs layer's
// fault hook before main.
#include <array>
#include <atomic>

#include "verbs/seams.h"

namespace rmsg::verbs {
namespace {

struct Slot {
  std::atomic<unsigned> calls{0};
  std::atomic<unsigned> nth{0};  // 0: disarmed
  std::atomic<int> err{0};
};

std::array<Slot, kVerbsCallKinds>& slots() {
  static std::array<Slot, kVerbsCallKinds> s;
  return s;
}

Slot& slot(VerbsCall call) {
  return slots()[static_cast<std::size_t>(call)];
}

int take_fault(VerbsCall call) noexcept {
  Slot& s = slot(call);
  const unsigned n = s.calls.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n != s.nth.load(std::memory_order_acquire)) return 0;
  return s.err.load(std::memory_order_relaxed);
}

[[maybe_unused]] const bool installed = [] {
  detail::verbs_fault_hook.store(&take_fault, std::memory_order_release);
  return true;
}();

}  // namespace

void inject_verbs_fault(VerbsCall call, unsigned nth, int err) {
  Slot& s = slot(call);
  s.nth.store(0, std::memory_order_relaxed);
  s.calls.store(0, std::memory_order_relaxed);
  s.err.store(err, std::memory_order_relaxed);
  s.nth.store(nth, std::memory_order_release);
}

void clear_verbs_faults() {
  for (int i = 0; i < kVerbsCallKinds; ++i) inject_verbs_fault(static_cast<VerbsCall>(i), 0, 0);
}

unsigned verbs_calls(VerbsCall call) {
  return slot(call).calls.load(std::memory_order_relaxed);
}

}  // namespace rmsg::verbs
