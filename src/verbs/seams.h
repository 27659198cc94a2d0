// Internal seams of the verbs layer for rmsg's own tests: not installed, not in the
// public API.
//
// Threading: as each function says.
#pragma once

#include <infiniband/verbs.h>

#include "rmsg/event_loop.h"

namespace rmsg::verbs {

// Routes `event` of `context` exactly as one read from its async_fd (nothing is acked:
// nothing was read). Call on `loop`'s thread. For tests of events a device cannot be made
// to raise: rxe never raises DEVICE_FATAL.
void route_async_event(EventLoop& loop, ibv_context* context, const ibv_async_event& event);

}  // namespace rmsg::verbs
