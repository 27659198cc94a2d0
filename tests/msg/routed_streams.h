// A fake StreamFactory::listen_routed for messengers over several shards: it stands in for
// the ConnectionManager's router over loopback streams, so a test sees where a connect
// request with (or without) affinity lands and what each shard makes of it. The connector
// and every accepted end live on the connector's loop (loopback pairs are one loop's):
// shard 0's loop, when the shards run on threads of their own.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "kit/loopback.h"
#include "msg/seams.h"
#include "rmsg/messenger.h"
#include "rmsg/stream.h"

namespace rmsg::testing {

// What the listening messenger's listen_routed registered: the connectors' factories
// deliver to it.
struct RoutedNet {
  std::function<std::size_t(std::uint64_t)> owner;
  std::vector<AcceptCallback> accepted;
};

class RoutedStreams final : public StreamFactory {
 public:
  RoutedStreams(EventLoop& loop, std::shared_ptr<RoutedNet> net, bool send_affinity)
      : loop_(loop), net_(std::move(net)), send_affinity_(send_affinity) {}

  // A pair: one end to the connector, the other to the shard the affinity names, or to
  // shard 0 without one (as ManagerStreams' router does). Never inside this call.
  void connect(const ConnectionParams& /*params*/, ConnectCallback done) override {
    auto pair = std::make_shared<std::pair<Stream, Stream>>(loopback_pair(loop_));
    const std::uint64_t affinity = send_affinity_ ? affinity_ : 0;
    loop_.defer([net = net_, affinity, pair, done = std::move(done)] {
      if (net->accepted.empty()) return done(make_error_code(Errc::connection_refused));
      const std::size_t target = affinity == 0 ? 0 : net->owner(affinity) % net->accepted.size();
      net->accepted[target](std::move(pair->second));
      done(std::move(pair->first));
    });
  }
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& /*params*/,
                          AcceptCallback on_accept) override {
    return loopback_listen(loop_, "plain", address.port(), {}, std::move(on_accept));
  }
  Result<Listener> listen_routed(const SocketAddress& address, const ConnectionParams& /*params*/,
                                 std::span<StreamFactory* const> /*shards*/,
                                 std::function<std::size_t(std::uint64_t)> owner,
                                 std::vector<AcceptCallback> accepted) override {
    net_->owner = std::move(owner);
    net_->accepted = std::move(accepted);
    return loopback_listen(loop_, "routed", address.port(), {}, [](Stream) {});
  }
  void set_affinity(std::uint64_t affinity) override { affinity_ = affinity; }

 private:
  EventLoop& loop_;
  std::shared_ptr<RoutedNet> net_;
  bool send_affinity_;
  std::uint64_t affinity_ = 0;
};

inline ConnectionParams rdma_params() {
  ConnectionParams p;
  p.transport = Transport::rdma;
  p.peer = SocketAddress::parse("127.0.0.1:7").value();
  return p;
}

}  // namespace rmsg::testing
