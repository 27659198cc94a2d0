// ConnectionManager: the public face, the TCP path (nothing pooled) and the periodic tick
// that drives the RDMA half's deadlines only while it has something to watch.
#include "rmsg/connection_manager.h"

#include "cm/manager_impl.h"
#include "cm/tcp_accept.h"
#include "cm/tcp_target.h"
#include "loop/loop_thread.h"
#include "rmsg/log.h"
#include "rmsg/tcp.h"
#include "tcp/tcp_linger.h"

namespace rmsg {

class ConnectionManager::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(EventLoop& loop, const ConnectionManagerOptions& options)
      : loop_(loop),
        options_(options),
        stats_(std::make_shared<cm::ManagerStats>()),
        limit_(std::make_shared<cm::ConnectionLimit>(options.max_connections)),
        tcp_target_(std::make_shared<cm::TcpTarget>(loop)) {}
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
  ~Impl() {
    tcp_target_->close();
    if (tick_ != 0) loop_.cancel_timer(tick_);
  }

  void connect(const ConnectionParams& params, ReportCallback done);
  Result<Listener> listen(const SocketAddress& address, const ConnectionParams& params,
                          AcceptCallback on_accept, AcceptRouting routing);
  Result<AcceptTarget> accept_routed(const ConnectionParams& params, AcceptCallback on_accept);
  void connect_tcp(const ConnectionParams& params, Lease lease, ReportCallback done);
  void refuse(std::error_code ec, ReportCallback done);
  Result<cm::RdmaSide*> rdma();
  void wake_tick();
  void on_tick();

  EventLoop& loop_;
  ConnectionManagerOptions options_;
  std::shared_ptr<cm::ManagerStats> stats_;
  std::shared_ptr<cm::ConnectionLimit> limit_;  // shared (weakly) with listeners' accepts
  std::shared_ptr<cm::TcpTarget> tcp_target_;   // accepted TCP connections routed here
  std::size_t tcp_pending_ = 0;
  TimerId tick_ = 0;
  std::unique_ptr<cm::RdmaSide> rdma_;  // destroyed first (declared last): cancels connects
};

void ConnectionManager::Impl::connect(const ConnectionParams& params, ReportCallback done) {
  auto lease = limit_->try_take();
  if (!lease) {
    stats_->add("limit.connects_refused");
    return refuse(make_error_code(ConnectErrc::connection_limit), std::move(done));
  }
  if (params.transport == Transport::tcp) {
    return connect_tcp(params, std::move(*lease), std::move(done));
  }
  auto side = rdma();
  if (!side) return refuse(side.error(), std::move(done));
  side.value()->connect(params, std::move(*lease), std::move(done));
}

// A connect that fails before it starts: reported later, never inside connect().
void ConnectionManager::Impl::refuse(std::error_code ec, ReportCallback done) {
  ConnectReport report;
  stats_->record(report, ec);
  loop_.defer([done = std::move(done), ec, report] { done(ec, report); });
}

void ConnectionManager::Impl::connect_tcp(const ConnectionParams& params, Lease lease,
                                          ReportCallback done) {
  ++tcp_pending_;
  if (rdma_) rdma_->pause();  // the pool's chores wait for this connect
  const auto start = loop_.now();
  // A connect callback is copyable: the lease rides in a shared holder.
  auto finish = [weak = weak_from_this(), stats = stats_, start, loop = &loop_,
                 lease = std::make_shared<Lease>(std::move(lease)),
                 done = std::move(done)](Result<Stream> r) mutable {
    ConnectReport report;
    report.transport = Transport::tcp;
    report.total = report.handshake = loop->now() - start;
    auto self = weak.lock();
    if (!self) {
      r = Errc::cancelled;  // the manager went away meanwhile (the stream closes here)
    } else {
      --self->tcp_pending_;
    }
    // One name per step deadline across transports: TCP's only step is its handshake.
    if (r.is(Errc::timeout)) r = make_error_code(ConnectErrc::handshake_timeout);
    if (r) tcp::hold_lease(r.value(), std::move(*lease));  // until the stream is released
    lease->reset();
    stats->record(report, r.error());
    done(std::move(r), report);
  };
  tcp_connect(loop_, params.peer, params.tcp, std::move(finish));
}

Result<Listener> ConnectionManager::Impl::listen(const SocketAddress& address,
                                                 const ConnectionParams& params,
                                                 AcceptCallback on_accept, AcceptRouting routing) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (params.transport == Transport::tcp) {
    return cm::listen_tcp(loop_, address, params, std::move(on_accept), std::move(routing), limit_,
                          stats_, tcp_target_);
  }
  auto side = rdma();
  if (!side) return side.error();
  return side.value()->listen(address, params, std::move(on_accept), std::move(routing.router));
}

Result<AcceptTarget> ConnectionManager::Impl::accept_routed(const ConnectionParams& params,
                                                            AcceptCallback on_accept) {
  if (params.transport == Transport::tcp) {  // any thread: it only opens the handle
    tcp_target_->open(cm::make_tcp_adopt(loop_, params.tcp, std::move(on_accept), stats_));
    return cm::TcpTargetAccess::make(tcp_target_);
  }
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (params.transport != Transport::rdma) return Errc::invalid_argument;
  auto side = rdma();
  if (!side) return side.error();
  return side.value()->accept_routed(params, std::move(on_accept));
}

Result<cm::RdmaSide*> ConnectionManager::Impl::rdma() {
  if (!rdma_) {
    auto side = cm::make_rdma_side(loop_, options_, stats_, limit_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->wake_tick();
    });
    if (!side) return side.error();
    rdma_ = std::move(side).value();
  }
  return rdma_.get();
}

void ConnectionManager::Impl::wake_tick() {
  if (tick_ != 0) return;
  tick_ = loop_.add_periodic(options_.tick, [this] { on_tick(); });
}

void ConnectionManager::Impl::on_tick() {
  if (rdma_ && rdma_->tick(loop_.now(), tcp_pending_ == 0)) return;
  loop_.cancel_timer(std::exchange(tick_, 0));  // nothing to watch until the next wake
}

// ---- public face

Result<std::unique_ptr<ConnectionManager>> ConnectionManager::create(
    EventLoop& loop, const ConnectionManagerOptions& options) {
  if (options.tick <= Duration::zero()) return Errc::invalid_argument;
  return std::unique_ptr<ConnectionManager>(
      new ConnectionManager(std::make_shared<Impl>(loop, options)));
}

ConnectionManager::ConnectionManager(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConnectionManager::~ConnectionManager() = default;

void ConnectionManager::connect(const ConnectionParams& params, ConnectCallback done) {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  impl_->connect(params, [done = std::move(done)](Result<Stream> r, const ConnectReport&) {
    done(std::move(r));
  });
}

void ConnectionManager::connect(const ConnectionParams& params, ReportCallback done) {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  impl_->connect(params, std::move(done));
}

Result<Listener> ConnectionManager::listen(const SocketAddress& address,
                                           const ConnectionParams& params,
                                           AcceptCallback on_accept) {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  return impl_->listen(address, params, std::move(on_accept), AcceptRouting{});
}

Result<Listener> ConnectionManager::listen(const SocketAddress& address,
                                           const ConnectionParams& params, AcceptCallback on_accept,
                                           AcceptRouter router) {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  AcceptRouting routing;
  routing.router = std::move(router);
  return impl_->listen(address, params, std::move(on_accept), std::move(routing));
}

Result<Listener> ConnectionManager::listen(const SocketAddress& address,
                                           const ConnectionParams& params, AcceptCallback on_accept,
                                           AcceptRouting routing) {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  return impl_->listen(address, params, std::move(on_accept), std::move(routing));
}

Result<AcceptTarget> ConnectionManager::accept_routed(const ConnectionParams& params,
                                                      AcceptCallback on_accept) {
  return impl_->accept_routed(params, std::move(on_accept));
}

const CounterSet& ConnectionManager::counters() const {
  return impl_->stats_->set();
}
std::size_t ConnectionManager::idle() const {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  return impl_->rdma_ ? impl_->rdma_->idle() : 0;
}
std::size_t ConnectionManager::recycling() const {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  return impl_->rdma_ ? impl_->rdma_->recycling() : 0;
}
std::size_t ConnectionManager::connections() const {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  return impl_->limit_->live();
}
std::size_t ConnectionManager::pending() const {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  return impl_->tcp_pending_ + (impl_->rdma_ ? impl_->rdma_->pending() : 0);
}
void ConnectionManager::drop_idle() {
  RMSG_ASSERT_LOOP_THREAD(impl_->loop_);
  if (impl_->rdma_) impl_->rdma_->drop_idle();
}
EventLoop& ConnectionManager::loop() const {
  return impl_->loop_;
}

}  // namespace rmsg

#if !RMSG_WITH_RDMA
namespace rmsg::cm {
Result<std::unique_ptr<RdmaSide>> make_rdma_side(EventLoop&, const ConnectionManagerOptions&,
                                                 std::shared_ptr<ManagerStats>,
                                                 std::shared_ptr<ConnectionLimit>,
                                                 std::function<void()>) {
  return Errc::not_supported;
}
}  // namespace rmsg::cm
#endif
