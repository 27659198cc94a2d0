// Lists RDMA devices and their ports' states for rmsg-info (rdma-core's verbs directly).
#pragma once

#include <cstdio>

namespace rmsg::info {

// Prints one line per device and per port; returns the number of ACTIVE ports.
int print_rdma_devices(std::FILE* out);

}  // namespace rmsg::info
