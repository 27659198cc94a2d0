// What the scale test reads about the process and the host, outside rmsg: pinned memory,
// descriptors, the RDMA resources the kernel counts, and rxe's RNR counters. Each read
// returns -1 (or an empty census) when the source is missing, so a TCP-only host still runs.
#pragma once

#include <cstdint>

namespace rmsg::perf {

// VmPin of /proc/self/status in bytes: memory the process has pinned (rxe's memory
// registrations count here through ib_umem_get).
std::int64_t vm_pin_bytes();
// Entries of /proc/self/fd.
std::int64_t open_fds();
// The sum over every RDMA device and port of the hw_counters rcvd_rnr_err and send_rnr_err.
std::int64_t rnr_counter_sum();

// `rdma -j resource show`, summed over devices (the whole host's, which in the guest is
// this process's). -1 each when the tool or the device is missing.
struct RdmaCensus {
  std::int64_t qp = -1, cq = -1, mr = -1, pd = -1, cm_id = -1;
};
RdmaCensus rdma_census();

// Raises RLIMIT_NOFILE's soft limit to at least `want` descriptors (the hard limit too
// when privileged); returns the soft limit now in force.
std::uint64_t raise_nofile(std::uint64_t want);

}  // namespace rmsg::perf
