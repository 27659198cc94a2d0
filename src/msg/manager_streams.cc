// The messenger's default source of streams: the ConnectionManager of its loop (one per
// shard). With several loops, loop 0's manager listens and routes each accepted
// connection by its connector's affinity to the manager of the loop that owns that peer's
// session (ConnectionManager: AcceptRouting, accept_routed; docs/messenger.md,
// Threading): an RDMA connect request carries the affinity (the connector's node id), and
// is accepted there, its QP, CQs and channels built on that loop; a TCP connection's
// affinity is its hello's node id, read by the manager from its first bytes with the
// messenger's reader below, and it becomes a Stream on that loop, unread.
#include <utility>
#include <vector>

#include "msg/seams.h"
#include "wire/banner.h"
#include "wire/hello_peek.h"

namespace rmsg {
namespace {

// A TCP connection's affinity: the node id of its hello (wire/hello_peek.h), once the
// banner (checked whole) and the hello's first field are in.
AffinityRead hello_affinity(std::span<const std::byte> prefix) {
  using V = AffinityRead::Verdict;
  const wire::HelloPeek p = wire::peek_hello(prefix);
  switch (p.verdict) {
    case wire::HelloPeek::Verdict::malformed:
      return {V::reject};
    case wire::HelloPeek::Verdict::node:
      return {V::route, 0, p.node};
    case wire::HelloPeek::Verdict::need_more:
      break;
  }
  // Garbage is told from a banner by its first bytes: they are waited for first.
  if (prefix.size() < wire::kBannerMagic.size()) return {V::need_more, wire::kBannerMagic.size()};
  return {V::need_more, p.need};
}

struct AcceptLimits {
  Duration timeout;         // MessengerOptions::handshake_timeout
  std::size_t max_waiting;  // MessengerOptions::max_accepts_waiting
};

class ManagerStreams final : public StreamFactory {
 public:
  ManagerStreams(std::unique_ptr<ConnectionManager> cm, AcceptLimits limits)
      : cm_(std::move(cm)), limits_(limits) {}

  void connect(const ConnectionParams& params, ConnectCallback done) override {
    if (affinity_ == 0 || params.affinity != 0) return cm_->connect(params, std::move(done));
    ConnectionParams p = params;
    p.affinity = affinity_;
    cm_->connect(p, std::move(done));
  }

  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept) override {
    return cm_->listen(address, params, std::move(on_accept));
  }

  Result<Listener> listen_routed(const SocketAddress& address, const ConnectionParams& params,
                                 std::span<StreamFactory* const> shards,
                                 std::function<std::size_t(std::uint64_t)> owner,
                                 std::vector<AcceptCallback> accepted) override {
    if (shards.empty() || shards.size() != accepted.size() || shards[0] != this) {
      return make_error_code(Errc::invalid_argument);
    }
    // Each other shard's manager accepts what is routed to it; a target left empty (this
    // loop's own) accepts here, through the listener's own callback.
    std::vector<AcceptTarget> targets(shards.size());
    for (std::size_t i = 1; i < shards.size(); ++i) {
      auto* other = dynamic_cast<ManagerStreams*>(shards[i]);
      if (other == nullptr) return make_error_code(Errc::not_supported);
      auto t = other->cm_->accept_routed(params, std::move(accepted[i]));
      if (!t) return t.error();
      targets[i] = std::move(t).value();
    }
    AcceptRouting routing;
    routing.router = [targets = std::move(targets),
                      owner = std::move(owner)](std::uint64_t affinity) -> AcceptTarget {
      // No affinity (an RDMA connector that is no messenger, or an older one): this loop
      // accepts, and the handshake finds the session wherever it is (session_relay.cc).
      if (affinity == 0) return {};
      return targets[owner(affinity) % targets.size()];
    };
    if (params.transport == Transport::tcp) {
      routing.read_affinity = hello_affinity;
      routing.max_prefix = wire::peek_hello_cap();
      routing.timeout = limits_.timeout;
      routing.max_waiting = limits_.max_waiting;
      routing.counters = counters_;
      routing.counter_prefix = "msg.route.";
    }
    return cm_->listen(address, params, std::move(accepted[0]), std::move(routing));
  }

  void set_affinity(std::uint64_t affinity) override { affinity_ = affinity; }
  void set_counters(CounterSet& counters) override { counters_ = &counters; }

 private:
  std::unique_ptr<ConnectionManager> cm_;
  AcceptLimits limits_;
  std::uint64_t affinity_ = 0;      // the messenger's node id, sent with every RDMA connect
  CounterSet* counters_ = nullptr;  // the shard's (msg.route.*); null: the manager's
};

Result<std::unique_ptr<StreamFactory>> make_streams(EventLoop& loop, std::size_t max_connections,
                                                    AcceptLimits limits) {
  // ConnectionManagerOptions::deferred_teardown and spares would keep a failover's
  // teardown and the probe's build off the switch (docs/perf.md, Failover), but are not
  // turned on here yet: with them on, one CI run of the two-host test hung in
  // rdma_destroy_id (rxe's wait for a DREQ that cannot leave), not yet explained.
  ConnectionManagerOptions options;
  options.max_connections = max_connections;
  auto cm = ConnectionManager::create(loop, options);
  if (!cm) return cm.error();
  return std::unique_ptr<StreamFactory>(
      std::make_unique<ManagerStreams>(std::move(cm).value(), limits));
}

}  // namespace

std::function<Result<std::unique_ptr<StreamFactory>>(EventLoop&)> manager_streams(
    const MessengerOptions& options) {
  return [max = options.max_connections,
          limits = AcceptLimits{options.handshake_timeout, options.max_accepts_waiting}](
             EventLoop& loop) { return make_streams(loop, max, limits); };
}

}  // namespace rmsg
