// rmsg-perf --test connect: connection setup through the ConnectionManager, fresh
// structures versus reused ones, client and server on one loop thread (docs/perf.md).
#pragma once

#include "options.h"

namespace rmsg::perf {

// Runs the connect test for o.transport (rdma, tcp or auto); the process exit status.
int run_connect_test(const Options& o);

}  // namespace rmsg::perf
