// rmsg-perf --test rpc: Messenger RPC calls (an echo handler) at 1, 16, 128... outstanding,
// one-way messages, and beside them the raw Stream ping-pong and streaming of the same size
// over the same transport, in the same run, client and server on one loop thread
// (docs/perf.md, Messenger RPC).
#pragma once

#include "options.h"

namespace rmsg::perf {

// Runs the rpc test for o.transport (rdma, tcp or auto); the process exit status.
int run_rpc_test(const Options& o);

}  // namespace rmsg::perf
