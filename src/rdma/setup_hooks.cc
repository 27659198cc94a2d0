// The RDMA stream's setup test hooks (rdma/seams.h): extra hello feature bits and where the
// rings start. Compiled into rmsg_testhooks only; installs itself before main.
#include <atomic>
#include <mutex>

#include "rdma/seams.h"

namespace rmsg::rdma {
namespace {

std::atomic<std::uint32_t> extra_features{0};
std::mutex ring_start_mutex;
RingStart ring_start_value;

std::uint32_t extra_hello_features() noexcept {
  return extra_features.load(std::memory_order_relaxed);
}

const SetupHooks kHooks{&extra_hello_features, &ring_start};

[[maybe_unused]] const bool installed = [] {
  setup_hooks.store(&kHooks, std::memory_order_release);
  return true;
}();

}  // namespace

void set_extra_hello_features(std::uint32_t bits) {
  extra_features.store(bits, std::memory_order_relaxed);
}

void set_ring_start(const RingStart& start) {
  const std::lock_guard lock(ring_start_mutex);
  ring_start_value = start;
}

RingStart ring_start() {
  const std::lock_guard lock(ring_start_mutex);
  return ring_start_value;
}

}  // namespace rmsg::rdma
