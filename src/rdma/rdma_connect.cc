// rdma_connect: the active side. The stream owns itself until its result is delivered.
#include "rdma/rdma_connect.h"
#include "rdma/seams.h"

#include "loop/loop_thread.h"
#include "rdma/rdma_stream.h"
#include "stream/stream_access.h"
#include "verbs/verbs.h"

namespace rmsg::rdma {

void connect_with(EventLoop& loop, const SocketAddress& peer, const RdmaOptions& options,
                  ResourceHooks hooks, Lease lease, ConnectCallback done) {
  auto fail_later = [&loop, &done](std::error_code ec) {
    loop.defer([done = std::move(done), ec] { done(ec); });
  };
  if (!peer.valid()) return fail_later(make_error_code(Errc::invalid_argument));
  auto stream = RdmaStream::create(loop, options, std::move(hooks), std::move(lease));
  if (!stream) return fail_later(stream.error());
  RdmaStream* raw = stream.value().get();
  raw->hold_self(std::move(stream).value());
  auto started = raw->start_connect(peer, [raw, done](std::error_code ec) {
    auto me = raw->release_self();
    if (ec) {
      me.reset();
      done(ec);
    } else {
      done(Stream(std::move(me)));
    }
  });
  if (!started) {
    raw->release_self().reset();
    fail_later(started.error());
  }
}

}  // namespace rmsg::rdma

namespace rmsg {

void rdma_connect(EventLoop& loop, const SocketAddress& peer, const RdmaOptions& options,
                  ConnectCallback done) {
  RMSG_ASSERT_LOOP_THREAD(loop);
  rdma::connect_with(loop, peer, options, rdma::default_resource_hooks(loop), {}, std::move(done));
}

Result<RdmaStreamInfo> rdma_stream_info(const Stream& stream) {
  const auto* s = detail::StreamAccess::as<const rdma::RdmaStream>(stream);
  if (s == nullptr) return Errc::invalid_argument;
  return s->info();
}

ibv_qp* rdma::stream_qp(const Stream& stream) {
  const auto* s = detail::StreamAccess::as<const rdma::RdmaStream>(stream);
  return s != nullptr && s->res_ ? s->res_->qp.get() : nullptr;
}

std::uint32_t rdma::stream_features(const Stream& stream) {
  const auto* s = detail::StreamAccess::as<const rdma::RdmaStream>(stream);
  return s != nullptr ? s->features_ : 0;
}

bool rdma_device_available() {
  return verbs::any_active_port();
}

}  // namespace rmsg
