// A consumer of every entry point of the installed rmsg/rdma.h and rmsg/rdma_errors.h: it
// links in every build (each declaration has a definition), and in a build without RDMA
// (RMSG_WITH_RDMA not defined, as the installed target and rmsg.pc say) it checks that
// they answer Errc::not_supported. With RDMA it only calls what needs no device.
#include <rmsg/event_loop.h>
#include <rmsg/rdma.h>
#include <rmsg/rdma_errors.h>

#include <chrono>
#include <cstdio>
#include <sstream>

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "rdma consumer: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  auto loop = rmsg::EventLoop::create();
  if (!loop) return fail("no event loop");
  std::ostringstream dump;
  rmsg::rdma_dump_device_counters(dump);
  const bool any_device = rmsg::rdma_device_available();
  const auto counted = rmsg::rdma_device_counter("none", "bytes_sent");
  const auto wc = rmsg::make_wc_error(5);
  const auto event = rmsg::make_async_event_error(1);
  const auto memlock = rmsg::memlock_limit_error();
  // Linked although not called here: they need a stream.
  auto* volatile info = &rmsg::rdma_stream_info;
  auto* volatile stream_counters = &rmsg::rdma_stream_counters;
  (void)info;
  (void)stream_counters;
  if (wc.message().empty() || event.message().empty() || memlock.message().empty()) {
    return fail("an RDMA error category has no message");
  }
#ifndef RMSG_WITH_RDMA
  if (any_device || counted != 0 || !dump.str().empty()) return fail("a device without RDMA");
  auto address = rmsg::SocketAddress::parse("127.0.0.1:0");
  if (!address) return fail("address");
  auto listener = rmsg::rdma_listen(**loop, *address, rmsg::RdmaOptions{}, [](rmsg::Stream) {});
  if (listener || listener.error() != rmsg::Errc::not_supported) return fail("rdma_listen");
  bool connected = false;
  rmsg::rdma_connect(**loop, *address, rmsg::RdmaOptions{}, [&](rmsg::Result<rmsg::Stream> s) {
    connected = !s && s.error() == rmsg::Errc::not_supported;
  });
  if (connected) return fail("rdma_connect called back inside the call");
  if (!(*loop)->run_for([&] { return connected; }, std::chrono::seconds(5))) {
    return fail("rdma_connect did not answer not_supported");
  }
  std::printf("rdma consumer: built without RDMA, every entry point answers not_supported\n");
#else
  (void)counted;
  std::printf("rdma consumer: built with RDMA (device %s)\n", any_device ? "present" : "absent");
#endif
  return 0;
}
