// rmsg-perf --test failover (RDMA builds): RPC echo calls over an rdma_preferred session
// whose RDMA connection is failed mid-run through rmsg's internal seam (a synthetic
// QP_FATAL routed to the live stream's QP, twice); the run goes on over TCP and returns
// to RDMA by the session's probes (docs/messenger.md, Failover; numbers in docs/perf.md).
#pragma once

#include "options.h"

namespace rmsg::perf {

// The process exit status: 0 when no call was lost or doubled and the session switched.
int run_failover_test(const Options& o);

}  // namespace rmsg::perf
