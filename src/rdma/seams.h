// Internal seams of the RDMA stream for rmsg's own tests: not installed, not in the public
// API. Each returns null / does nothing for a stream of another transport.
//
// Threading: the stream's loop thread.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <optional>

#include "rmsg/stream.h"

namespace rmsg::rdma {

// The QP of an RDMA stream while it holds its resources, else null: for tests that route
// an asynchronous event to it by hand (verbs::route_async_event in verbs/seams.h).
ibv_qp* stream_qp(const Stream& stream);

// Feature bits the hellos of streams created from now on advertise besides rmsg's own
// (wire::kKnownFeatures): for tests that put an extension block on the wire, with bits no
// rmsg version defines. Any thread (an atomic); set it before the connects it is for.
void set_extra_hello_features(std::uint32_t bits);
// The feature bits both hellos of an RDMA stream set (0 for another transport).
std::uint32_t stream_features(const Stream& stream);

// Where the rings of streams set up from now on start: the first send block and send-queue
// slot, and the structure generation before this use's bump (next_generation): for
// tests that run a stream across the wrap of each index. Any thread (a mutex); set it
// before the connects it is for, and back to RingStart{} after.
struct RingStart {
  std::uint32_t send_block = 0;
  std::uint32_t send_slot = 0;
  std::optional<std::uint16_t> generation;
};
void set_ring_start(const RingStart& start);
RingStart ring_start();

// set_extra_hello_features and set_ring_start are test hooks (setup_hooks.cc, compiled into
// rmsg_testhooks, never into librmsg). Linked into a program, setup_hooks.cc installs these
// for the stream's setup to ask; null everywhere else: rmsg's own features, rings from 0,
// one atomic load per setup and no lock.
struct SetupHooks {
  std::uint32_t (*extra_features)() noexcept;
  RingStart (*ring_start)();
};
extern std::atomic<const SetupHooks*> setup_hooks;

}  // namespace rmsg::rdma
