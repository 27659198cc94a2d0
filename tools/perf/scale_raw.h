// The scale test's reference: the same bytes over a few raw-verbs QPs (the "verbs"
// baseline runner, verbs_runner.cc), run after rmsg's phases in the same process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rmsg::perf {

// Aggregate MB/s (10^6 B/s) of `qps` raw-verbs RC QPs on `host`, each with its own
// server thread and client thread, moving `total` bytes among them in `size`-byte SENDs:
// the bytes over the longest client's time from its first SEND to its server's ack. The
// baseline paces itself with RNR retries, so the caller reads its RNR counters before.
// -1 when the runner is not built in or a QP fails (the reason on stderr).
double raw_verbs_mb_per_s(const std::string& host, std::size_t qps, std::uint64_t total,
                          std::uint64_t size);

}  // namespace rmsg::perf
