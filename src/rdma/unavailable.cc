// A build without RDMA (RMSG_WITH_RDMA=OFF) installs the same rmsg/rdma.h: every entry point
// exists and answers Errc::not_supported (not retryable), so one program builds against
// either library and learns at run time which transports it has.
#include <ostream>

#include "rmsg/rdma.h"

namespace rmsg {

Result<Listener> rdma_listen(EventLoop&, const SocketAddress&, const RdmaOptions&, AcceptCallback) {
  return make_error_code(Errc::not_supported);
}

// As the contract says: `done` runs once, on the loop thread, never inside this call.
void rdma_connect(EventLoop& loop, const SocketAddress&, const RdmaOptions&, ConnectCallback done) {
  loop.defer([done = std::move(done)] { done(make_error_code(Errc::not_supported)); });
}

Result<RdmaStreamInfo> rdma_stream_info(const Stream&) {
  return make_error_code(Errc::invalid_argument);  // no stream is an RDMA stream
}

const CounterSet* rdma_stream_counters(const Stream&) {
  return nullptr;
}

std::uint64_t rdma_device_counter(std::string_view, std::string_view) {
  return 0;
}

void rdma_dump_device_counters(std::ostream&) {}

bool rdma_device_available() {
  return false;
}

}  // namespace rmsg
