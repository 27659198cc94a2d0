// Internal seams of the verbs layer for rmsg's own tests: not installed, not in the
// public API.
//
// Threading: as each function says.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "rmsg/event_loop.h"

namespace rmsg::verbs {

// Routes `event` of `context` exactly as one read from its async_fd (nothing is acked:
// nothing was read). Call on `loop`'s thread. For tests of events a device cannot be made
// to raise: rxe never raises DEVICE_FATAL.
void route_async_event(EventLoop& loop, ibv_context* context, const ibv_async_event& event);

// ---- Fault injection for resource creation: the factories of verbs/verbs.h of that
// kind fail a chosen call as rdma-core would (null, errno set) without calling it, so
// that every setup path can be made to fail at every step and checked to leave nothing
// behind. The error then takes the factory's usual way (reg_mr's ENOMEM/EPERM under a
// finite RLIMIT_MEMLOCK becomes memlock_limit_error()).
//
// Threading: any thread (atomics). The counts are per process: calls made by several
// loops at once are counted in whichever order they happen, so a test that wants the
// N-th call of one setup arms the fault while nothing else sets up.
enum class VerbsCall : std::uint8_t {
  alloc_pd,
  create_comp_channel,
  create_cq,
  create_qp,
  reg_mr,
};
inline constexpr int kVerbsCallKinds = 5;

// From now on the `nth` call (1-based) of `call` fails with errno `err`; the calls of
// `call` are counted from 0 again. nth 0 disarms (and still resets the count).
void inject_verbs_fault(VerbsCall call, unsigned nth, int err);
// Disarms every fault and resets every count.
void clear_verbs_faults();
// Calls of `call` (failed ones included) since its count was last reset.
unsigned verbs_calls(VerbsCall call);

namespace detail {
// The injector itself (faults.cc) is a test hook: it is in rmsg_testhooks, never in librmsg,
// and installs this hook when a program that links it starts. librmsg only asks the hook:
// one atomic load per create, null (no fault, nothing counted) in every other program.
using VerbsFaultHook = int (*)(VerbsCall call) noexcept;
extern std::atomic<VerbsFaultHook> verbs_fault_hook;

// The errno the current call of `call` is to fail with, or 0 (and counts the call).
inline int take_verbs_fault(VerbsCall call) noexcept {
  const VerbsFaultHook hook = verbs_fault_hook.load(std::memory_order_acquire);
  return hook != nullptr ? hook(call) : 0;
}
}  // namespace detail

}  // namespace rmsg::verbs
