// rdma_listen: the passive side. Validates each connect request's hello (wrong version or
// malformed -> reject with a reject hello), offers it to the route hook (a connection
// manager may hand it to another loop), else accepts it (rdma/rdma_acceptor.h), which
// hands the stream to the application once it is established.
#include <cerrno>

#include "loop/loop_thread.h"
#include "rdma/rdma_acceptor.h"
#include "rdma/rdma_connect.h"
#include "rdmacm/cm_connection.h"
#include "rmsg/log.h"

namespace rmsg::rdma {
namespace {

class RdmaListener final : public ListenerImpl, private rdmacm::CmEventHandler {
 public:
  RdmaListener(EventLoop& loop, const RdmaOptions& options, ResourceHooks hooks,
               AcceptCallback on_accept, std::shared_ptr<rdmacm::CmChannel> channel)
      : route_(std::move(hooks.route)),
        channel_(channel),
        acceptor_(loop, options, std::move(hooks), std::move(on_accept), std::move(channel)) {}
  RdmaListener(const RdmaListener&) = delete;
  RdmaListener& operator=(const RdmaListener&) = delete;
  RdmaListener(RdmaListener&&) = delete;
  RdmaListener& operator=(RdmaListener&&) = delete;
  ~RdmaListener() override { close(); }

  Result<void> start(const SocketAddress& address) {
    auto id = channel_->create_id(this);
    if (!id) return id.error();
    id_ = std::move(id).value();
    SocketAddress bind_to = address;
    if (rdma_bind_addr(id_.get(), bind_to.sockaddr_ptr()) != 0) return errno_code(errno);
    if (rdma_listen(id_.get(), 128) != 0) return errno_code(errno);
    port_ = ntohs(rdma_get_src_port(id_.get()));
    bound_ = address;
    bound_.set_port(port_);
    return {};
  }

  std::string local_address() const override { return bound_.to_string(); }
  std::uint16_t port() const override { return port_; }
  void close() override {
    channel_->retire(std::move(id_));
    acceptor_.clear();  // half-accepted streams: their peers see a disconnect
  }
  std::error_code error() const override { return error_; }

 private:
  void on_cm_event(const rdma_cm_event& event) override {
    if (event.event == RDMA_CM_EVENT_DEVICE_REMOVAL && event.id == id_.get()) {
      return on_device_removal();
    }
    if (event.event != RDMA_CM_EVENT_CONNECT_REQUEST) return;
    auto hello = wire::decode_hello(rdmacm::cm_private_data(event));
    if (!hello || hello->kind != wire::HelloKind::request) {
      return reject_request(channel_.get(), verbs::CmId(event.id),
                            hello.is(Errc::version_mismatch) ? wire::RejectReason::version
                                                             : wire::RejectReason::malformed);
    }
    if (route_ && route_(event, hello.value())) return;  // handed to another loop
    acceptor_.accept(verbs::CmId(event.id), rdmacm::cm_private_data(event), hello.value());
  }

  // The removal of the device waits until every cm id and verbs object on it is gone: the
  // listening id and the half-accepted streams (bound to this device, as the listener is)
  // go now. Nothing is accepted afterwards; error() says why.
  void on_device_removal() {
    RMSG_LOG(warn, "rdma listener %s: device removed, no longer accepting",
             bound_.to_string().c_str());
    error_ = make_error_code(Errc::device_error);
    close();
  }

  std::function<bool(const rdma_cm_event&, const wire::Hello&)> route_;
  std::shared_ptr<rdmacm::CmChannel> channel_;
  Acceptor acceptor_;
  SocketAddress bound_;
  std::uint16_t port_ = 0;
  std::error_code error_;
  verbs::CmId id_;
};

}  // namespace

Result<Listener> listen_with(EventLoop& loop, const SocketAddress& address,
                             const RdmaOptions& options, ResourceHooks hooks,
                             AcceptCallback on_accept) {
  if (!address.valid()) return Errc::invalid_argument;
  auto geometry = geometry_from(options);
  if (!geometry) return geometry.error();
  auto channel = rdmacm::CmChannel::for_loop(loop);
  if (!channel) return channel.error();
  auto listener = std::make_unique<RdmaListener>(loop, options, std::move(hooks),
                                                 std::move(on_accept), std::move(channel).value());
  RMSG_TRY(listener->start(address));
  return Listener(std::move(listener));
}

}  // namespace rmsg::rdma

namespace rmsg {

Result<Listener> rdma_listen(EventLoop& loop, const SocketAddress& address,
                             const RdmaOptions& options, AcceptCallback on_accept) {
  RMSG_ASSERT_LOOP_THREAD(loop);
  return rdma::listen_with(loop, address, options, {}, std::move(on_accept));
}

}  // namespace rmsg
