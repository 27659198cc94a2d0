// The messenger's default source of streams: the ConnectionManager of its loop (one per
// shard). Over RDMA with several loops, loop 0's manager listens and routes each connect
// request by the connector's affinity (its node id) to the manager of the loop that owns
// that peer's session, which builds the QP, its CQs and channels on its own loop and
// accepts there (ConnectionManager: AcceptRouter, accept_routed; docs/messenger.md,
// Threading). TCP needs none of this: the front moves an accepted socket itself.
#include <utility>
#include <vector>

#include "msg/seams.h"

namespace rmsg {
namespace {

class ManagerStreams final : public StreamFactory {
 public:
  explicit ManagerStreams(std::unique_ptr<ConnectionManager> cm) : cm_(std::move(cm)) {}

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
    AcceptRouter router = [targets = std::move(targets),
                           owner = std::move(owner)](std::uint64_t affinity) -> AcceptTarget {
      // No affinity (not a messenger, or an older one): this loop accepts, and the
      // handshake finds the session wherever it is not (a new one here).
      if (affinity == 0) return {};
      return targets[owner(affinity) % targets.size()];
    };
    return cm_->listen(address, params, std::move(accepted[0]), std::move(router));
  }

  void set_affinity(std::uint64_t affinity) override { affinity_ = affinity; }

 private:
  std::unique_ptr<ConnectionManager> cm_;
  std::uint64_t affinity_ = 0;  // the messenger's node id, sent with every RDMA connect
};

Result<std::unique_ptr<StreamFactory>> make_streams(EventLoop& loop, std::size_t max_connections) {
  // ConnectionManagerOptions::deferred_teardown and spares would keep a failover's
  // teardown and the probe's build off the switch (docs/perf.md, Failover), but are not
  // turned on here yet: with them on, one CI run of the two-host test hung in
  // rdma_destroy_id (rxe's wait for a DREQ that cannot leave), not yet explained.
  ConnectionManagerOptions options;
  options.max_connections = max_connections;
  auto cm = ConnectionManager::create(loop, options);
  if (!cm) return cm.error();
  return std::unique_ptr<StreamFactory>(std::make_unique<ManagerStreams>(std::move(cm).value()));
}

}  // namespace

std::function<Result<std::unique_ptr<StreamFactory>>(EventLoop&)> manager_streams(
    const MessengerOptions& options) {
  return [max = options.max_connections](EventLoop& loop) { return make_streams(loop, max); };
}

}  // namespace rmsg
