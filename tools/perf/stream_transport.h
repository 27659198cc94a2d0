// The plug-in point for rmsg stream transports: each transport file (transport_tcp.cc,
// transport_rdma.cc when RMSG_WITH_RDMA, ...) defines one StreamTransport and registers it
// with RMSG_PERF_STREAM_TRANSPORT. The generic stream runner (stream_runner.cc) measures
// any of them through the rmsg::Stream interface.
#pragma once

#include <string>
#include <vector>

#include "perf.h"
#include "rmsg/address.h"
#include "rmsg/event_loop.h"
#include "rmsg/stream.h"

namespace rmsg::perf {

struct StreamTransport {
  const char* name;
  // Empty when the transport can run here; otherwise why not ("no RDMA device with an
  // active port"). Null: always available.
  std::string (*unavailable_reason)();
  // `options`: the run's (RunOptions::block_count/block_size shape RDMA rings).
  Result<Listener> (*listen)(EventLoop& loop, const SocketAddress& address,
                             const RunOptions& options, AcceptCallback on_accept);
  void (*connect)(EventLoop& loop, const SocketAddress& address, const RunOptions& options,
                  ConnectCallback callback);
  // The host an in-process run binds to (RDMA needs a device's address, not 127.0.0.1).
  // Null: RunOptions::host.
  std::string (*local_host)();
  // Prints the counters of `stream` and of the transport (on stderr). Null: none.
  void (*print_counters)(const Stream& stream);
};

bool register_stream_transport(const StreamTransport* transport);
const StreamTransport* find_stream_transport(const std::string& name);
std::vector<const StreamTransport*> stream_transports();

}  // namespace rmsg::perf

#define RMSG_PERF_CONCAT2(a, b) a##b
#define RMSG_PERF_CONCAT(a, b) RMSG_PERF_CONCAT2(a, b)
// Registers a StreamTransport (a namespace-scope object) at static initialisation.
#define RMSG_PERF_STREAM_TRANSPORT(transport)                           \
  static const bool RMSG_PERF_CONCAT(rmsg_perf_registered_, __LINE__) = \
      ::rmsg::perf::register_stream_transport(&(transport))
