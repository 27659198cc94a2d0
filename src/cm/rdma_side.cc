// The connection manager's RDMA half: managed connects (one state machine each, observed
// step by step; the manager's tick enforces each step's deadline), managed listeners, and
// the structure pool behind both.
#include <map>

#include "cm/accept_target.h"
#include "cm/manager_impl.h"
#include "cm/structure_pool.h"
#include "rdma/rdma_acceptor.h"
#include "rdma/rdma_connect.h"
#include "rdma/seams.h"
#include "rdmacm/cm_connection.h"
#include "rmsg/log.h"

namespace rmsg::cm {
namespace {

using Step = rdmacm::CmConnection::Step;
constexpr auto kNever = Clock::time_point::max();

// One connect until its result is delivered.
struct PendingConnect {
  std::uint64_t id = 0;
  ConnectionParams params;
  ConnectionManager::ReportCallback done;
  ConnectReport report;
  EventLoop* loop = nullptr;  // the clock of the step deadlines and the report's times
  Clock::time_point start, route_at, resources_at;
  rdmacm::CmConnection* conn = nullptr;  // while the connection exists
  Step step = Step::resolving;
  Lease lease;  // moves into the stream
  Clock::time_point deadline = kNever;
  std::error_code deadline_error;
  bool cancelled = false;

  void on_step(rdmacm::CmConnection& c, Step s);
  std::error_code step_timeout() const;
};

void PendingConnect::on_step(rdmacm::CmConnection& c, Step s) {
  const auto now = loop->now();
  const RdmaOptions& o = params.rdma;
  if (s == Step::gone) {
    conn = nullptr;
    return;
  }
  conn = &c;
  step = s;
  deadline = kNever;
  switch (s) {
    case Step::resolving:
      if (params.service_level) c.set_service_level(*params.service_level);
      deadline = now + o.resolve_timeout;
      deadline_error = make_error_code(ConnectErrc::address_timeout);
      break;
    case Step::address_resolved:
      deadline = now + o.resolve_timeout;
      deadline_error = make_error_code(ConnectErrc::route_timeout);
      break;
    case Step::route_resolved:
      route_at = now;
      report.resolve = now - start;
      break;
    case Step::resources_ready:
      resources_at = now;
      report.resources = now - route_at;
      break;
    case Step::connect_sent:
      deadline = now + o.connect_timeout;
      deadline_error = make_error_code(ConnectErrc::handshake_timeout);
      break;
    case Step::established:
      report.handshake = now - resources_at;
      break;
    case Step::failed:
      report.reject_status = c.reject_status();
      break;
    case Step::gone:
      break;
  }
}

// rdma_cm's own (backstop) timeouts report Errc::timeout: name the step it happened in.
std::error_code PendingConnect::step_timeout() const {
  switch (step) {
    case Step::resolving:
      return make_error_code(ConnectErrc::address_timeout);
    case Step::address_resolved:
      return make_error_code(ConnectErrc::route_timeout);
    default:
      return make_error_code(ConnectErrc::handshake_timeout);
  }
}

using PendingTable = std::map<std::uint64_t, std::shared_ptr<PendingConnect>>;
using AcceptingTable = std::map<const ibv_qp*, Clock::time_point>;

class RdmaSideImpl final : public RdmaSide {
 public:
  RdmaSideImpl(EventLoop& loop, std::shared_ptr<rdmacm::CmChannel> channel,
               const ConnectionManagerOptions& options, std::shared_ptr<ManagerStats> stats,
               std::shared_ptr<ConnectionLimit> limit, std::function<void()> wake_tick)
      : loop_(loop),
        channel_(channel),
        target_(std::make_shared<TargetState>(loop, channel->get())),
        stats_(std::move(stats)),
        limit_(std::move(limit)),
        wake_tick_(std::move(wake_tick)),
        pool_(std::make_shared<StructurePool>(loop, std::move(channel), options, stats_,
                                              wake_tick_)) {}
  RdmaSideImpl(const RdmaSideImpl&) = delete;
  RdmaSideImpl& operator=(const RdmaSideImpl&) = delete;
  RdmaSideImpl(RdmaSideImpl&&) = delete;
  RdmaSideImpl& operator=(RdmaSideImpl&&) = delete;
  ~RdmaSideImpl() override {
    target_->close();  // first: no other loop hands a request to this side any more
    // Their callbacks come later from the loop, with Errc::cancelled.
    for (auto& [id, p] : *pending_) {
      p->cancelled = true;
      if (p->conn != nullptr) p->conn->expire(make_error_code(Errc::cancelled));
    }
  }

  void connect(const ConnectionParams& params, Lease lease,
               ConnectionManager::ReportCallback done) override;
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept, AcceptRouter router) override;
  Result<AcceptTarget> accept_routed(const ConnectionParams& params,
                                     AcceptCallback on_accept) override;
  bool tick(Clock::time_point now, bool quiet) override;
  void pause() override { pool_->pause(); }
  std::size_t idle() const override { return pool_->idle(); }
  std::size_t recycling() const override { return pool_->recycling(); }
  std::size_t pending() const override { return pending_->size(); }
  void drop_idle() override { pool_->drop_idle(); }

 private:
  rdma::ResourceHooks connect_hooks(const std::shared_ptr<PendingConnect>& p);
  rdma::ResourceHooks passive_hooks(const ConnectionParams& params);
  AcceptCallback delivered(AcceptCallback on_accept);

  EventLoop& loop_;
  std::shared_ptr<rdmacm::CmChannel> channel_;
  std::shared_ptr<TargetState> target_;     // closed first, in the destructor
  std::shared_ptr<rdma::Acceptor> routed_;  // accept_routed(): requests routed here
  std::shared_ptr<ManagerStats> stats_;
  std::shared_ptr<ConnectionLimit> limit_;
  std::function<void()> wake_tick_;
  std::shared_ptr<StructurePool> pool_;
  std::shared_ptr<PendingTable> pending_ = std::make_shared<PendingTable>();
  // Passive connections between their CONNECT_REQUEST (the structure's acquisition) and
  // their delivery, by QP, with the time by which they are given up on (their setup failed:
  // nothing tells the listener's hooks) - so that the pool's chores wait for them as for
  // connects.
  std::shared_ptr<AcceptingTable> accepting_ = std::make_shared<AcceptingTable>();
  std::uint64_t next_id_ = 0;
};

// The key is complete once the route names the local device and port.
Result<std::unique_ptr<rdma::ConnResources>> acquire_for(StructurePool& pool,
                                                         const ConnectionParams& params,
                                                         rdma_cm_id* id,
                                                         const rdma::Geometry& geometry,
                                                         bool passive, bool& reused) {
  const char* device = ibv_get_device_name(id->verbs->device);
  if ((!params.device.empty() && params.device != device) ||
      (params.device_port != 0 && params.device_port != id->port_num)) {
    RMSG_LOG(warn, "cm: the route uses %s port %u, not the %s port %u asked for", device,
             id->port_num, params.device.c_str(), params.device_port);
    return Errc::invalid_argument;
  }
  const auto key = ReuseKey::from(params, device, id->port_num, passive);
  return pool.acquire(key, id, geometry, reused);
}

rdma::ResourceHooks RdmaSideImpl::connect_hooks(const std::shared_ptr<PendingConnect>& p) {
  rdma::ResourceHooks hooks;
  hooks.acquire = [pool = std::weak_ptr<StructurePool>(pool_), weak = std::weak_ptr(p)](
                      rdma_cm_id* id,
                      const rdma::Geometry& g) -> Result<std::unique_ptr<rdma::ConnResources>> {
    auto self = pool.lock();
    auto pc = weak.lock();
    if (!self || !pc) return Errc::cancelled;
    return acquire_for(*self, pc->params, id, g, false, pc->report.reused);
  };
  hooks.release = pool_->release_hook();
  hooks.on_step = [weak = std::weak_ptr(p)](rdmacm::CmConnection& c, Step s) {
    if (auto pc = weak.lock()) pc->on_step(c, s);
  };
  hooks.affinity = p->params.affinity;
  return hooks;
}

void RdmaSideImpl::connect(const ConnectionParams& params, Lease lease,
                           ConnectionManager::ReportCallback done) {
  auto p = std::make_shared<PendingConnect>();
  p->id = ++next_id_;
  p->lease = std::move(lease);
  p->params = params;
  p->done = std::move(done);
  p->loop = &loop_;
  p->start = loop_.now();
  pending_->emplace(p->id, p);
  pool_->pause();  // this connect's setup before the pool's chores
  wake_tick_();
  auto finish = [table = std::weak_ptr<PendingTable>(pending_), stats = stats_,
                 p](Result<Stream> r) {
    if (auto t = table.lock()) t->erase(p->id);
    if (p->cancelled) r = Errc::cancelled;  // a stream that made it anyway closes here
    if (r.is(Errc::timeout)) r = p->step_timeout();
    p->report.total = p->loop->now() - p->start;
    stats->record(p->report, r.error());
    RMSG_LOG(debug, "cm: rdma connect %s: resolve %lld us, resources %lld us%s, handshake %lld us",
             r ? "ok" : r.error().message().c_str(),
             static_cast<long long>(p->report.resolve.count() / 1000),
             static_cast<long long>(p->report.resources.count() / 1000),
             p->report.reused ? " (reused)" : "",
             static_cast<long long>(p->report.handshake.count() / 1000));
    auto deliver = std::move(p->done);
    deliver(std::move(r), p->report);
  };
  // The stream holds the lease until it is released.
  rdma::connect_with(loop_, params.peer, params.rdma, connect_hooks(p), std::move(p->lease),
                     std::move(finish));
}

// Accepted connections key on the listener's (or target's) own parameters.
rdma::ResourceHooks RdmaSideImpl::passive_hooks(const ConnectionParams& params) {
  rdma::ResourceHooks hooks;
  hooks.acquire = [pool = std::weak_ptr<StructurePool>(pool_),
                   accepting = std::weak_ptr<AcceptingTable>(accepting_), loop = &loop_, params](
                      rdma_cm_id* id,
                      const rdma::Geometry& g) -> Result<std::unique_ptr<rdma::ConnResources>> {
    auto self = pool.lock();
    if (!self) return rdma::create_conn_resources(*loop, id->verbs, g);  // manager gone: unpooled
    self->pause();
    bool reused = false;
    auto res = acquire_for(*self, params, id, g, true, reused);
    if (auto a = accepting.lock(); a && res) {
      (*a)[res.value()->qp.get()] = loop->now() + params.rdma.connect_timeout;
    }
    return res;
  };
  hooks.release = pool_->release_hook();
  hooks.admit = [limit = std::weak_ptr<ConnectionLimit>(limit_),
                 stats = std::weak_ptr<ManagerStats>(stats_)]() -> std::optional<Lease> {
    auto l = limit.lock();
    if (!l) return Lease{};  // manager gone: admitted, counted against nothing
    auto lease = l->try_take();
    if (!lease) {
      RMSG_LOG(info, "cm: connection limit (%zu) reached, rejecting a connect request", l->max());
      if (auto st = stats.lock()) st->add("limit.accepts_rejected");
    }
    return lease;
  };
  hooks.on_handshakes_full = [stats = std::weak_ptr<ManagerStats>(stats_)] {
    if (auto st = stats.lock()) st->add("limit.handshakes_rejected");
  };
  return hooks;
}

// The accept's delivery ends its wait (accepting_).
AcceptCallback RdmaSideImpl::delivered(AcceptCallback on_accept) {
  return [accepting = std::weak_ptr<AcceptingTable>(accepting_),
          on_accept = std::move(on_accept)](Stream s) {
    if (auto a = accepting.lock()) a->erase(rdma::stream_qp(s));
    on_accept(std::move(s));
  };
}

Result<Listener> RdmaSideImpl::listen(const SocketAddress& address, const ConnectionParams& params,
                                      AcceptCallback on_accept, AcceptRouter router) {
  on_accept = delivered(std::move(on_accept));
  rdma::ResourceHooks hooks = passive_hooks(params);
  if (router) hooks.route = make_route_hook(std::move(router), target_, channel_, stats_);
  return rdma::listen_with(loop_, address, params.rdma, std::move(hooks), std::move(on_accept));
}

Result<AcceptTarget> RdmaSideImpl::accept_routed(const ConnectionParams& params,
                                                 AcceptCallback on_accept) {
  RMSG_TRY(rdma::geometry_from(params.rdma));
  on_accept = delivered(std::move(on_accept));
  if (routed_) {
    routed_->configure(params.rdma, passive_hooks(params), std::move(on_accept));
  } else {
    routed_ = std::make_shared<rdma::Acceptor>(loop_, params.rdma, passive_hooks(params),
                                               std::move(on_accept), channel_);
    target_->open(make_adopt(routed_, stats_));
  }
  return TargetAccess::make(target_);
}

bool RdmaSideImpl::tick(Clock::time_point now, bool quiet) {
  std::vector<std::shared_ptr<PendingConnect>> due;
  for (auto& [id, p] : *pending_) {
    if (p->conn != nullptr && now > p->deadline) due.push_back(p);
  }
  for (auto& p : due) {
    p->deadline = kNever;
    if (p->conn != nullptr) p->conn->expire(p->deadline_error);
  }
  std::erase_if(*accepting_, [now](const auto& a) { return now > a.second; });
  const bool pool_busy = pool_->tick(now, quiet && pending_->empty() && accepting_->empty());
  return pool_busy || !pending_->empty();
}

}  // namespace

Result<std::unique_ptr<RdmaSide>> make_rdma_side(EventLoop& loop,
                                                 const ConnectionManagerOptions& options,
                                                 std::shared_ptr<ManagerStats> stats,
                                                 std::shared_ptr<ConnectionLimit> limit,
                                                 std::function<void()> wake_tick) {
  auto channel = rdmacm::CmChannel::for_loop(loop);
  if (!channel) return channel.error();
  return std::unique_ptr<RdmaSide>(new RdmaSideImpl(loop, std::move(channel).value(), options,
                                                    std::move(stats), std::move(limit),
                                                    std::move(wake_tick)));
}

}  // namespace rmsg::cm
