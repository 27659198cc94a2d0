// rmsg's TCP stream as a perf transport.
#include "rmsg/tcp.h"
#include "stream_transport.h"

namespace rmsg::perf {
namespace {

Result<Listener> listen(EventLoop& loop, const SocketAddress& address, const RunOptions&,
                        AcceptCallback cb) {
  return tcp_listen(loop, address, TcpOptions{}, std::move(cb));
}

void connect(EventLoop& loop, const SocketAddress& address, const RunOptions&, ConnectCallback cb) {
  tcp_connect(loop, address, TcpOptions{}, std::move(cb));
}

const StreamTransport kTcp{"tcp", nullptr, listen, connect, nullptr, nullptr};
RMSG_PERF_STREAM_TRANSPORT(kTcp);

}  // namespace
}  // namespace rmsg::perf
