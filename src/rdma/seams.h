// Internal seams of the RDMA stream for rmsg's own tests: not installed, not in the public
// API. Each returns null / does nothing for a stream of another transport.
//
// Threading: the stream's loop thread.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "rmsg/stream.h"

namespace rmsg::rdma {

// The QP of an RDMA stream while it holds its resources, else null: for tests that route
// an asynchronous event to it by hand (verbs::route_async_event in verbs/seams.h).
ibv_qp* stream_qp(const Stream& stream);

// Feature bits the hellos of streams created from now on advertise besides rmsg's own
// (wire::kKnownFeatures): for tests that put an extension block on the wire, with bits no
// rmsg version defines. Any thread (an atomic); set it before the connects it is for.
void set_extra_hello_features(std::uint32_t bits);
// The feature bits both hellos of an RDMA stream set (0 for another transport).
std::uint32_t stream_features(const Stream& stream);

}  // namespace rmsg::rdma
