// The raw Stream baselines of rmsg-perf --test rpc, measured in the same run and on the
// same loop thread as the RPC rows: a ping-pong (write `size` bytes, the peer echoes
// them, wait for all of them) and streaming (`size`-byte messages written one write()
// each, the peer counts bytes). Streams come from the ConnectionManager, as the
// messenger's do.
#pragma once

#include <cstdint>
#include <vector>

#include "rmsg/connection_manager.h"
#include "rmsg/event_loop.h"

namespace rmsg::perf {

struct PingPongResult {
  std::vector<double> rtt_us;
  double elapsed_s = 0;
};
Result<PingPongResult> stream_ping_pong(EventLoop& loop, const ConnectionParams& params,
                                        const SocketAddress& local, std::uint64_t size,
                                        std::uint64_t iters);
// Messages per second written one by one and fully received.
Result<double> stream_streaming(EventLoop& loop, const ConnectionParams& params,
                                const SocketAddress& local, std::uint64_t size,
                                std::uint64_t count);

}  // namespace rmsg::perf
