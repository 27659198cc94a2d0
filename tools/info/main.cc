// rmsg-info: a short self-check that prints what this build and this machine offer:
// the transports built in, the RDMA devices and their ports, and a TCP loopback
// round trip through rmsg itself. Exit status 1 when the self-check fails. With --admin
// PATH it prints instead what a running process's admin endpoint answers (rmsg/admin.h).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "rdma_devices.h"
#include "rmsg/admin.h"
#include "rmsg/event_loop.h"
#include "rmsg/tcp.h"

namespace {

using namespace std::chrono_literals;
using rmsg::Result;
using rmsg::Stream;

void print_transports() {
  std::printf("transports: tcp");
#if defined(RMSG_WITH_RDMA) && defined(RMSG_INFO_RDMA_STREAM)
  std::printf(", rdma\n");
#elif defined(RMSG_WITH_RDMA)
  std::printf(" (rdma: verbs support built, the rdma stream not yet)\n");
#else
  std::printf(" (rdma: not built, RMSG_WITH_RDMA=OFF)\n");
#endif
}

void print_memlock() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return;
  if (lim.rlim_cur == RLIM_INFINITY) {
    std::printf("memlock limit: unlimited\n");
  } else {
    std::printf("memlock limit: %llu KiB (RDMA registers its rings against it)\n",
                static_cast<unsigned long long>(lim.rlim_cur / 1024));
  }
}

// Listener and client on one loop thread, one round trip of 5 bytes.
bool tcp_self_check() {
  auto loop = rmsg::EventLoop::create();
  if (!loop) {
    std::printf("tcp self-check: FAILED, no event loop: %s\n", loop.error().message().c_str());
    return false;
  }
  auto& l = **loop;
  Stream server;
  auto addr = rmsg::SocketAddress::parse("127.0.0.1:0").value();
  auto listener = rmsg::tcp_listen(l, addr, {}, [&](Stream s) { server = std::move(s); });
  if (!listener) {
    std::printf("tcp self-check: FAILED, listen: %s\n", listener.error().message().c_str());
    return false;
  }
  addr.set_port(listener->port());
  const auto start = rmsg::Clock::now();
  std::optional<Result<Stream>> client;
  rmsg::tcp_connect(l, addr, {}, [&](Result<Stream> r) { client.emplace(std::move(r)); });
  char buf[8] = {};
  bool sent = false;
  std::size_t got = 0;
  const bool ok = l.run_for(
      [&] {
        if (!client || !server.valid()) return false;
        if (!client->ok()) return true;
        if (!sent) sent = (*client)->write("hello", 5).ok();
        auto n = server.read(buf + got, sizeof buf - got);
        if (n.ok()) got += *n;
        return got >= 5;
      },
      5s);
  const auto us = std::chrono::duration<double, std::micro>(rmsg::Clock::now() - start).count();
  if (!ok || !client->ok() || std::string(buf, got) != "hello") {
    std::printf("tcp self-check: FAILED (%s)\n",
                client && !client->ok() ? client->error().message().c_str() : "no data");
    return false;
  }
  std::printf("tcp self-check: connect + 5 bytes over %s on one loop thread: ok, %.0f us\n",
              addr.to_string().c_str(), us);
  return true;
}

// The one text of --help (help2man makes the man page from it).
constexpr const char* kUsage =
    "usage: rmsg-info [--help | --version | --admin PATH [--prometheus]]\n"
    "Prints what this build and this machine offer: the transports built in, the RDMA\n"
    "devices and their ports, the memlock limit, then a TCP loopback round trip through\n"
    "rmsg on one loop thread.\n"
    "  --help     this text\n"
    "  --version  rmsg's version\n"
    "  --admin PATH  instead, print what the admin endpoint at PATH (a running process's\n"
    "             Unix socket, rmsg::AdminEndpoint) answers: counters and sessions as JSON\n"
    "  --prometheus  with --admin: the counters in Prometheus text format\n"
    "Exit status: 0 the self-check (or the query) passed, 1 it failed, 2 usage.\n";

int query_admin(const std::string& path, bool prometheus) {
  auto answer = rmsg::admin_request(path, prometheus ? "prometheus" : "json", 5s);
  if (!answer) {
    std::fprintf(stderr, "rmsg-info: %s: %s\n", path.c_str(), answer.error().message().c_str());
    return 1;
  }
  if (std::fputs(answer->c_str(), stdout) < 0) return 1;
  // The endpoint answers an error as one JSON line {"error":...}.
  return answer->rfind("{\"error\"", 0) == 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    const std::string_view arg = argv[1];
    if (arg == "--admin" && argc >= 3 && argc <= 4) {
      if (argc == 4 && std::string_view(argv[3]) != "--prometheus") {
        std::fputs(kUsage, stderr);
        return 2;
      }
      return query_admin(argv[2], argc == 4);
    }
    if (argc == 2 && arg == "--help") return std::fputs(kUsage, stdout) < 0 ? 1 : 0;
    if (argc == 2 && arg == "--version")
      return std::printf("rmsg-info %s\n", RMSG_VERSION) < 0 ? 1 : 0;
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::printf("rmsg %s\n", RMSG_VERSION);
  print_transports();
  const int active = rmsg::info::print_rdma_devices(stdout);
  std::printf("rdma ports active: %d\n", active);
  print_memlock();
  return tcp_self_check() ? 0 : 1;
}
