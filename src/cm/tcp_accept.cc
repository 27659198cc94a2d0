#include "cm/tcp_accept.h"

#include <utility>

#include "cm/tcp_router.h"
#include "rmsg/log.h"
#include "tcp/tcp_listener.h"
#include "tcp/tcp_stream.h"

namespace rmsg::cm {
namespace {

// The listener's handle: the socket listener, and the router its sockets wait in. Closing
// it stops accepting and closes what still waits. It may outlive its manager: it keeps
// the manager's counters alive while its router counts into them.
class RoutedListener final : public ListenerImpl {
 public:
  RoutedListener(std::shared_ptr<ManagerStats> stats, std::unique_ptr<TcpRouter> router)
      : stats_(std::move(stats)), router_(std::move(router)) {}
  RoutedListener(const RoutedListener&) = delete;
  RoutedListener& operator=(const RoutedListener&) = delete;
  RoutedListener(RoutedListener&&) = delete;
  RoutedListener& operator=(RoutedListener&&) = delete;
  ~RoutedListener() override { close(); }

  void set_inner(Listener inner) { inner_ = std::move(inner); }
  std::string local_address() const override { return inner_.local_address(); }
  std::uint16_t port() const override { return inner_.port(); }
  void close() override {
    inner_.close();
    router_.reset();
  }
  std::error_code error() const override { return inner_.error(); }

 private:
  std::shared_ptr<ManagerStats> stats_;
  std::unique_ptr<TcpRouter> router_;
  Listener inner_;
};

}  // namespace

Result<Listener> listen_tcp(EventLoop& loop, const SocketAddress& address,
                            const ConnectionParams& params, AcceptCallback on_accept,
                            AcceptRouting routing, std::weak_ptr<ConnectionLimit> limit,
                            std::weak_ptr<ManagerStats> stats, std::shared_ptr<TcpTarget> own) {
  using Deliver = std::function<void(tcp::OwnedSocket, Lease)>;
  Deliver here = [&loop, options = params.tcp, on_accept = std::move(on_accept)](
                     tcp::OwnedSocket socket, Lease lease) {
    on_accept(tcp::make_stream(loop, socket.release(), options, std::move(lease)));
  };
  std::unique_ptr<TcpRouter> router;
  std::shared_ptr<ManagerStats> kept;  // the manager's counters, when the router counts there
  Deliver deliver = here;
  if (routing.read_affinity) {
    if (routing.counters == nullptr) kept = stats.lock();
    if (routing.counters == nullptr && !kept) return Errc::cancelled;
    CounterSet& counters = routing.counters != nullptr ? *routing.counters : kept->set();
    router = std::make_unique<TcpRouter>(loop, std::move(routing), std::move(own), counters,
                                         std::move(here));
    deliver = [r = router.get()](tcp::OwnedSocket socket, Lease lease) {
      r->take(std::move(socket), std::move(lease));
    };
  }
  // An accepted connection over the limit is reset at once (the kernel accepted it
  // already), else it holds a lease until it is released.
  auto admit = [limit = std::move(limit), stats = std::move(stats),
                deliver = std::move(deliver)](tcp::OwnedSocket socket) {
    Lease lease;
    if (auto l = limit.lock()) {
      auto taken = l->try_take();
      if (!taken) {
        RMSG_LOG(info, "cm: connection limit (%zu) reached, closing an accepted connection",
                 l->max());
        if (auto st = stats.lock()) st->add("limit.accepts_rejected");
        return;  // the socket closes abortively
      }
      lease = std::move(*taken);
    }
    deliver(std::move(socket), std::move(lease));
  };
  if (!router) return tcp::listen_sockets(loop, address, params.tcp, std::move(admit));
  auto routed = std::make_unique<RoutedListener>(std::move(kept), std::move(router));
  auto inner = tcp::listen_sockets(loop, address, params.tcp, std::move(admit));
  if (!inner) return inner.error();
  routed->set_inner(std::move(inner).value());
  return Listener(std::move(routed));
}

TcpTarget::Adopt make_tcp_adopt(EventLoop& loop, const TcpOptions& options,
                                AcceptCallback on_accept, std::weak_ptr<ManagerStats> stats) {
  return [&loop, options, on_accept = std::move(on_accept), stats = std::move(stats)](
             tcp::OwnedSocket socket, Lease lease) {
    auto st = stats.lock();
    if (!st) return;  // the target's manager went after the hand-off: closed, released
    st->add("routing.adopted");
    on_accept(tcp::make_stream(loop, socket.release(), options, std::move(lease)));
  };
}

}  // namespace rmsg::cm
