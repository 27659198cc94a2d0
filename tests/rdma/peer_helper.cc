// rdma_peer_helper: the other process of the RDMA failure tests (failure_test.cc,
// memlock_test.cc), which kill, stop or constrain it.
//   rdma_peer_helper write ADDR PORT           connect, write until the stream fails
//   rdma_peer_helper idle ADDR PORT KA_MS      connect with that keepalive, then idle
//   rdma_peer_helper noread ADDR PORT KA_MS    as idle, but never reads (alive, no credits)
//   rdma_peer_helper memlock ADDR PORT BYTES   lower RLIMIT_MEMLOCK, connect: exit 0 when
//                                              the error is rmsg::memlock_limit_error()
//   rdma_peer_helper portdown ADDR 0           a pair in this process: exit 0 when both fail
//                                              with PORT_ERR once the caller downs the link
//   rdma_peer_helper devremove ADDR 0          a listener and a pair in this process: exit 0
//                                              when all fail with device_error once the
//                                              caller deletes the device, and the delete
//                                              completes while this process lives
// Exit status: 0 as above, 2 usage, 3 connect failed otherwise, 4 unexpected success,
// 5 another error than expected.
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "rmsg/log.h"
#include "rmsg/rdma.h"

namespace {

using namespace std::chrono_literals;

std::optional<rmsg::Result<rmsg::Stream>> connect(rmsg::EventLoop& loop, const char* host,
                                                  const char* port,
                                                  const rmsg::RdmaOptions& options) {
  auto addr =
      rmsg::SocketAddress::from_host_port(host, static_cast<std::uint16_t>(std::atoi(port)));
  if (!addr) return rmsg::Result<rmsg::Stream>(addr.error());
  std::optional<rmsg::Result<rmsg::Stream>> out;
  rmsg::rdma_connect(loop, *addr, options,
                     [&](rmsg::Result<rmsg::Stream> r) { out.emplace(std::move(r)); });
  loop.run_for([&] { return out.has_value(); }, 30s);
  return out;
}

int write_forever(rmsg::EventLoop& loop, rmsg::Stream& s) {
  std::vector<std::byte> buf(64 * 1024, std::byte{0x5a});
  s.on_writable([&] {
    for (;;) {
      auto n = s.write(buf);
      if (n) continue;
      if (!n.is(rmsg::Errc::would_block)) loop.stop();
      return;
    }
  });
  return loop.run() ? 0 : 3;
}

// A connected pair in this process; after "connected" the caller takes the port down:
// both streams must fail with the PORT_ERR device event. Prints the error, exit 0 if so.
int port_down(rmsg::EventLoop& loop, const char* host) {
  auto addr = rmsg::SocketAddress::from_host_port(host, 0);
  if (!addr) return 3;
  rmsg::Stream server;
  auto l = rmsg::rdma_listen(loop, *addr, {}, [&](rmsg::Stream s) { server = std::move(s); });
  if (!l) return 3;
  addr->set_port(l->port());
  std::optional<rmsg::Result<rmsg::Stream>> client;
  rmsg::rdma_connect(loop, *addr, {},
                     [&](rmsg::Result<rmsg::Stream> r) { client.emplace(std::move(r)); });
  if (!loop.run_for([&] { return client && server.valid(); }, 30s) || !client->ok()) return 3;
  rmsg::Stream c = std::move(*client).value();
  std::printf("connected\n");
  std::fflush(stdout);
  const auto tick = loop.add_periodic(20ms, [] {});
  const bool failed = loop.run_for([&] { return c.error() && server.error(); }, 60s);
  loop.cancel_timer(tick);
  const auto* counters = rmsg::rdma_stream_counters(c);
  std::printf(
      "%s: %s; async_event.port_error %llu\n", failed ? "failed" : "still up",
      c.error().message().c_str(),
      static_cast<unsigned long long>(counters ? counters->value("async_event.port_error") : 0));
  const auto want = rmsg::make_async_event_error(IBV_EVENT_PORT_ERR);
  return failed && c.error() == want && server.error() == want ? 0 : 5;
}

// How many files of removed verbs devices ("/dev/infiniband/uverbsN (deleted)") this
// process holds open: a Soft-RoCE device's removal waits until none is (rxe cannot
// disassociate a context).
int removed_device_files() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code ec2;
    const auto target = std::filesystem::read_symlink(e.path(), ec2).string();
    if (target.rfind("/dev/infiniband/uverbs", 0) == 0 && target.ends_with(" (deleted)")) ++n;
  }
  return n;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A listener and a connected pair in this process; after "connected" the caller deletes
// the device. The listener and the streams must fail with Errc::device_error (a stream may
// see its peer's disconnect first: connection_reset), and this
// process must let go of the device (no file of it left open: no verbs object, no context)
// so that the delete completes while it lives: exit 0 once the device is gone.
int device_removal(rmsg::EventLoop& loop, const char* host, const char* device) {
  auto addr = rmsg::SocketAddress::from_host_port(host, 0);
  if (!addr) return 3;
  rmsg::Stream server;
  auto l = rmsg::rdma_listen(loop, *addr, {}, [&](rmsg::Stream s) { server = std::move(s); });
  if (!l) return 3;
  addr->set_port(l->port());
  std::optional<rmsg::Result<rmsg::Stream>> client;
  rmsg::rdma_connect(loop, *addr, {},
                     [&](rmsg::Result<rmsg::Stream> r) { client.emplace(std::move(r)); });
  if (!loop.run_for([&] { return client && server.valid(); }, 30s) || !client->ok()) return 3;
  rmsg::Stream c = std::move(*client).value();
  std::printf("connected\n");
  std::fflush(stdout);
  const auto tick = loop.add_periodic(20ms, [] {});
  // The clock starts at the first failure: the delete starts in another process.
  loop.run_for([&] { return c.error() || server.error(); }, 60s);
  const auto t0 = std::chrono::steady_clock::now();
  const bool failed = loop.run_for([&] { return c.error() && server.error(); }, 30s);
  const double failed_ms = ms_since(t0);
  const bool released = loop.run_for([&] { return removed_device_files() == 0; }, 30s);
  const double released_ms = ms_since(t0);
  const std::string sys = std::string("/sys/class/infiniband/") + device;
  const bool gone = loop.run_for([&] { return !std::filesystem::exists(sys); }, 30s);
  const double gone_ms = ms_since(t0);
  loop.cancel_timer(tick);
  std::printf(
      "%s: client %s; server %s; listener %s; streams failed +%.0f ms; removed device files "
      "%d at +%.0f ms; device %s at +%.0f ms\n",
      failed ? "failed" : "still up", c.error().message().c_str(), server.error().message().c_str(),
      l->error().message().c_str(), failed_ms, removed_device_files(), released_ms,
      gone ? "gone" : "still there", gone_ms);
  const auto want = rmsg::make_error_code(rmsg::Errc::device_error);
  // A stream may see its peer's disconnect (the peer failed on its own removal event) before
  // its own removal event: connection_reset then, its resources dropped all the same.
  const auto reset = rmsg::make_error_code(rmsg::Errc::connection_reset);
  const auto ok = [&](std::error_code ec) { return ec == want || ec == reset; };
  const bool all_failed = ok(c.error()) && ok(server.error()) &&
                          (c.error() == want || server.error() == want) && l->error() == want;
  return failed && all_failed && released && gone ? 0 : 5;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const std::string mode = argv[1];
  if (std::getenv("RMSG_HELPER_LOG") != nullptr) {
    rmsg::set_log_handler(rmsg::log_to_stderr, rmsg::LogLevel::debug);
  }
  auto loop = rmsg::EventLoop::create();
  if (!loop) return 3;
  rmsg::RdmaOptions o;
  o.rnr_retry_count = 0;
  if (mode == "memlock") {
    if (argc < 5) return 2;
    const rlim_t limit = std::strtoull(argv[4], nullptr, 10);
    const rlimit lim{limit, limit};
    if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0) return 3;
    auto r = connect(**loop, argv[2], argv[3], o);
    if (!r) return 3;
    if (r->ok()) return 4;
    std::printf("connect failed: %s\n", r->error().message().c_str());
    return r->error() == rmsg::memlock_limit_error() ? 0 : 3;
  }
  if (mode == "portdown") return port_down(**loop, argv[2]);
  if (mode == "devremove") {
    const char* dev = std::getenv("RMSG_RDMA_DEVICE");
    return device_removal(**loop, argv[2], dev ? dev : "rxe0");
  }
  if (mode == "idle" || mode == "noread") {
    if (argc < 5) return 2;
    o.keepalive_interval = std::chrono::milliseconds(std::atoi(argv[4]));
    o.idle_timeout = 0ms;
  }
  auto r = connect(**loop, argv[2], argv[3], o);
  if (!r || !r->ok()) {
    std::fprintf(stderr, "helper: connect failed: %s\n",
                 r ? r->error().message().c_str() : "timeout");
    return 3;
  }
  rmsg::Stream s = std::move(*r).value();
  std::printf("connected\n");
  std::fflush(stdout);
  if (mode == "write") return write_forever(**loop, s);
  if (mode == "idle") {
    s.on_readable([&] {
      std::byte b[64];
      if (auto n = s.read(b, sizeof b); !n && !n.is(rmsg::Errc::would_block)) (*loop)->stop();
    });
    return (*loop)->run() ? 0 : 3;
  }
  if (mode == "noread") return (*loop)->run() ? 0 : 3;
  return 2;
}
