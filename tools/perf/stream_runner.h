// Turns a StreamTransport into a Runner: the client runs on a loop owned by the runner;
// the in-process server runs on a second thread with its own loop, or, with
// RunOptions::one_thread, on the client's loop (a client and a server on one thread).
#pragma once

#include <memory>

#include "perf.h"
#include "stream_transport.h"

namespace rmsg::perf {

Result<std::unique_ptr<Runner>> make_stream_runner(const StreamTransport& transport,
                                                   const RunOptions& options);

}  // namespace rmsg::perf
