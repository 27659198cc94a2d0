// rdma_listen: the passive side. Validates each connect request's hello (wrong version or
// malformed -> reject with a reject hello), builds a stream that accepts it, and hands
// the stream to the application once it is established.
#include <cerrno>
#include <map>

#include "loop/loop_thread.h"
#include "rdma/rdma_connect.h"
#include "rdma/rdma_stream.h"
#include "rdmacm/cm_connection.h"
#include "rmsg/log.h"

namespace rmsg::rdma {
namespace {

class RdmaListener final : public ListenerImpl, private rdmacm::CmEventHandler {
 public:
  RdmaListener(EventLoop& loop, const RdmaOptions& options, ResourceHooks hooks,
               AcceptCallback on_accept, std::shared_ptr<rdmacm::CmChannel> channel)
      : loop_(loop),
        options_(options),
        hooks_(std::move(hooks)),
        on_accept_(std::move(on_accept)),
        channel_(std::move(channel)) {}
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
    pending_.clear();  // half-accepted streams: their peers see a disconnect
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
      return refuse(event, hello.is(Errc::version_mismatch) ? wire::RejectReason::version
                                                            : wire::RejectReason::malformed);
    }
    ResourceHooks hooks = hooks_;
    if (hooks_.admit) {
      hooks.lease = hooks_.admit();
      if (!hooks.lease) return refuse(event, wire::RejectReason::resources);
    }
    auto stream = RdmaStream::create(loop_, options_, std::move(hooks));
    if (!stream) return refuse(event, wire::RejectReason::resources);
    RdmaStream* raw = stream.value().get();
    pending_.emplace(raw, std::move(stream).value());
    auto started = raw->start_accept(event, hello.value(), [this, raw](std::error_code ec) {
      auto node = pending_.extract(raw);
      if (node.empty() || ec) return;  // a failed half-accepted stream just goes away
      on_accept_(Stream(std::move(node.mapped())));
    });
    if (!started) pending_.erase(raw);  // rejected by the CM state machine already
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

  void refuse(const rdma_cm_event& event, wire::RejectReason reason) {
    RMSG_LOG(info, "rdma listener: rejecting a connect request (reason %d)",
             static_cast<int>(reason));
    wire::Hello h;
    h.kind = wire::HelloKind::reject;
    h.reason = reason;
    const auto data = wire::encode_hello(h);
    rdma_reject(event.id, data.data(), static_cast<std::uint8_t>(data.size()));
    channel_->retire(verbs::CmId(event.id));
  }

  EventLoop& loop_;
  RdmaOptions options_;
  ResourceHooks hooks_;
  AcceptCallback on_accept_;
  std::shared_ptr<rdmacm::CmChannel> channel_;
  SocketAddress bound_;
  std::uint16_t port_ = 0;
  std::map<RdmaStream*, std::unique_ptr<RdmaStream>> pending_;
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
