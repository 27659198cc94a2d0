// listen() and add_peer() without a transport (include/rmsg/messenger.h): RDMA where a
// local device has an active port, TCP always. The look at the devices is the bounded
// probe: it reads the device list and port states, sends nothing and waits for nobody, so a
// host without RDMA goes to TCP at once instead of trying a connect that cannot work.
// With a device, the session's policy is rdma_preferred: an RDMA connect that fails (the
// peer has no device, or listens on TCP only) is followed at once by a TCP one
// (docs/messenger.md, Failover).
#include <utility>

#include "rmsg/log.h"
#include "rmsg/messenger.h"
#include "rmsg/rdma.h"

namespace rmsg {

Result<std::string> Messenger::listen(const SocketAddress& address) {
  ConnectionParams tcp;
  tcp.transport = Transport::tcp;
  auto bound = listen(address, tcp);
  if (!bound || !rdma_device_available()) return bound;
  // The same port on RDMA (its own port space), so one address serves both.
  auto same = SocketAddress::parse(bound.value());
  if (!same) return bound;
  ConnectionParams rdma;
  rdma.transport = Transport::rdma;
  if (auto r = listen(same.value(), rdma); !r) {
    RMSG_LOG(warn, "messenger: listen %s: RDMA: %s (TCP only)", bound.value().c_str(),
             r.error().message().c_str());
  }
  return bound;
}

Result<void> Messenger::add_peer(NodeId peer, const SocketAddress& address) {
  PeerAddresses a;
  a.rdma.peer = address;
  a.tcp.peer = address;
  a.policy = rdma_device_available() ? TransportPolicy::rdma_preferred : TransportPolicy::tcp_only;
  return add_peer(peer, a);
}

}  // namespace rmsg
