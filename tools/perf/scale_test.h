// rmsg-perf --test scale: many connections on one loop thread - memory, descriptors and
// kernel objects per connection at idle, connect rate, loop stalls, RNR and bandwidth with
// all and with 10 connections active, every byte checked (scale_test.cc, docs/perf.md).
#pragma once

#include "options.h"

namespace rmsg::perf {

// Runs the scale test for o.transport (rdma, tcp or auto) with o.connections; the process
// exit status.
int run_scale_test(const Options& o);

}  // namespace rmsg::perf
