// Internal seams of the RDMA stream for rmsg's own tests: not installed, not in the public
// API. Each returns null / does nothing for a stream of another transport.
//
// Threading: the stream's loop thread.
#pragma once

#include <infiniband/verbs.h>

#include "rmsg/stream.h"

namespace rmsg::rdma {

// The QP of an RDMA stream while it holds its resources, else null: for tests that route
// an asynchronous event to it by hand (verbs::route_async_event in verbs/seams.h).
ibv_qp* stream_qp(const Stream& stream);

}  // namespace rmsg::rdma
