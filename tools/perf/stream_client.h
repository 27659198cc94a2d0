// The client side of a perf run over any rmsg Stream: sends the WireHeader, then drives
// a ping-pong (lat) or a one-way stream (bw) on the stream's loop until it is done.
#pragma once

#include "perf.h"
#include "rmsg/stream.h"

namespace rmsg::perf {

// Runs `spec` over a connected stream; loop-thread-only (the stream's loop). The stream
// is left open; on error the Result says what failed.
Result<Measurement> run_stream_client(Stream& stream, const Spec& spec, Progress& progress);

}  // namespace rmsg::perf
