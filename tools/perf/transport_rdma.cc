// rmsg's RDMA stream as a perf transport (built with RMSG_WITH_RDMA).
#include <ifaddrs.h>
#include <net/if.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "rmsg/rdma.h"
#include "stream_transport.h"

namespace rmsg::perf {
namespace {

std::string unavailable() {
  return rdma_device_available() ? std::string() : "no RDMA device with an active port";
}

RdmaOptions rdma_options(const RunOptions& o) {
  RdmaOptions r;
  if (o.block_count != 0) r.send_block_count = r.recv_block_count = o.block_count;
  if (o.block_size != 0) r.send_block_size = r.recv_block_size = o.block_size;
  if (o.setup_calls >= 0) {
    r.max_setup_calls_per_iteration = static_cast<std::uint32_t>(o.setup_calls);
  }
  if (o.shared_connections != 0) {
    r.shared_receive = true;
    r.shared_connections = o.shared_connections;
    // --blocks sizes the pool too: its blocks, and the guaranteed window (the count)
    if (o.block_size != 0) r.shared_block_size = o.block_size;
    if (o.block_count != 0) r.shared_guaranteed = o.block_count;
    r.shared_window = std::max(r.shared_window, r.shared_guaranteed);
  }
  return r;
}

Result<Listener> listen(EventLoop& loop, const SocketAddress& address, const RunOptions& o,
                        AcceptCallback cb) {
  return rdma_listen(loop, address, rdma_options(o), std::move(cb));
}

void connect(EventLoop& loop, const SocketAddress& address, const RunOptions& o,
             ConnectCallback cb) {
  rdma_connect(loop, address, rdma_options(o), std::move(cb));
}

// True when binding `sa` with rdma_cm lands on an RDMA device (a quick, local check).
bool has_rdma_device(const sockaddr* sa) {
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) return false;
  rdma_cm_id* id = nullptr;
  bool found = false;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0) {
    found = rdma_bind_addr(id, const_cast<sockaddr*>(sa)) == 0 && id->verbs != nullptr;
    rdma_destroy_id(id);
  }
  rdma_destroy_event_channel(ch);
  return found;
}

// RDMA cannot use 127.0.0.1: an in-process run binds the first IPv4 address whose
// interface carries an RDMA device (RMSG_RDMA_ADDR overrides).
std::string local_host() {
  if (const char* env = std::getenv("RMSG_RDMA_ADDR"); env != nullptr && *env != '\0') {
    return env;
  }
  std::string host = "127.0.0.1";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return host;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) != 0 || (i->ifa_flags & IFF_UP) == 0) continue;
    if (has_rdma_device(i->ifa_addr)) {
      host = SocketAddress::from_sockaddr(i->ifa_addr, sizeof(sockaddr_in)).host();
      break;
    }
  }
  freeifaddrs(list);
  return host;
}

void print_counters(const Stream& stream) {
  std::ostringstream out;
  if (const CounterSet* c = rdma_stream_counters(stream)) c->dump(out, "stream.");
  rdma_dump_device_counters(out);
  std::fputs(out.str().c_str(), stderr);
}

const StreamTransport kRdma{"rdma", unavailable, listen, connect, local_host, print_counters};
RMSG_PERF_STREAM_TRANSPORT(kRdma);

}  // namespace
}  // namespace rmsg::perf
