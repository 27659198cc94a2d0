// rdma_peer_helper: the other process of the RDMA failure tests (failure_test.cc,
// memlock_test.cc), which kill, stop or constrain it.
//   rdma_peer_helper write ADDR PORT           connect, write until the stream fails
//   rdma_peer_helper idle ADDR PORT KA_MS      connect with that keepalive, then idle
//   rdma_peer_helper memlock ADDR PORT BYTES   lower RLIMIT_MEMLOCK, connect: exit 0 when
//                                              the error is rmsg::memlock_limit_error()
//   rdma_peer_helper portdown ADDR 0           a pair in this process: exit 0 when both fail
//                                              with PORT_ERR once the caller downs the link
// Exit status: 0 as above, 2 usage, 3 connect failed otherwise, 4 unexpected success,
// 5 another error than expected.
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  if (mode == "idle") {
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
  return 2;
}
