#include "rdma/rdma_acceptor.h"

#include "rdma/rdma_stream.h"
#include "rdma/setup_budget.h"
#include "rmsg/log.h"

namespace rmsg::rdma {

Acceptor::Acceptor(EventLoop& loop, const RdmaOptions& options, ResourceHooks hooks,
                   AcceptCallback on_accept, std::shared_ptr<rdmacm::CmChannel> channel)
    : loop_(loop),
      options_(options),
      hooks_(std::move(hooks)),
      on_accept_(std::move(on_accept)),
      channel_(std::move(channel)) {}

Acceptor::~Acceptor() {
  clear();
}

void Acceptor::configure(const RdmaOptions& options, ResourceHooks hooks,
                         AcceptCallback on_accept) {
  options_ = options;
  hooks_ = std::move(hooks);
  on_accept_ = std::move(on_accept);
}

void Acceptor::clear() {
  pending_.clear();
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& q : queued)
    reject_request(channel_.get(), std::move(q.id), wire::RejectReason::resources);
}

void Acceptor::accept(verbs::CmId id, std::span<const std::byte> request,
                      const wire::Hello& hello) {
  // Before any lease, stream or structure: a flood of requests that never complete costs
  // at most max_inbound_handshakes structures until their connect_timeout.
  const std::size_t cap = options_.max_inbound_handshakes;
  if (cap != 0 && pending_.size() + queued_.size() >= cap) {
    if (hooks_.on_handshakes_full) hooks_.on_handshakes_full();
    return reject_request(channel_.get(), std::move(id), wire::RejectReason::resources);
  }
  // Behind earlier queued requests, or over this iteration's setup budget: later.
  if (!queued_.empty() || !SetupBudget::of(loop_)->try_take(
                              kAcceptSetupCalls, options_.max_setup_calls_per_iteration)) {
    queued_.push_back({std::move(id), {request.begin(), request.end()}, hello});
    if (!drain_deferred_) defer_drain();
    return;
  }
  admit(std::move(id), request, hello);
}

void Acceptor::defer_drain() {
  drain_deferred_ = true;
  loop_.defer([this, alive = alive_.token()] {
    if (!alive.alive()) return;
    drain_deferred_ = false;
    drain_queue();
  });
}

void Acceptor::drain_queue() {
  auto budget = SetupBudget::of(loop_);
  while (!queued_.empty()) {
    if (!budget->try_take(kAcceptSetupCalls, options_.max_setup_calls_per_iteration)) {
      return defer_drain();  // deferred from a deferred task: the next iteration
    }
    Queued q = std::move(queued_.front());
    queued_.pop_front();
    admit(std::move(q.id), q.request, q.hello);
  }
}

void Acceptor::admit(verbs::CmId id, std::span<const std::byte> request, const wire::Hello& hello) {
  ResourceHooks hooks = hooks_;
  hooks.route = {};
  Lease lease;
  if (hooks_.admit) {
    auto admitted = hooks_.admit();
    if (!admitted)
      return reject_request(channel_.get(), std::move(id), wire::RejectReason::resources);
    lease = std::move(*admitted);
  }
  auto stream = RdmaStream::create(loop_, options_, std::move(hooks), std::move(lease));
  if (!stream) return reject_request(channel_.get(), std::move(id), wire::RejectReason::resources);
  RdmaStream* raw = stream.value().get();
  pending_.emplace(raw, std::move(stream).value());
  auto started = raw->start_accept(std::move(id), request, hello, [this, raw](std::error_code ec) {
    auto node = pending_.extract(raw);
    if (node.empty() || ec) return;  // a failed half-accepted stream just goes away
    on_accept_(Stream(std::move(node.mapped())));
  });
  if (!started) pending_.erase(raw);  // rejected by the CM state machine already
}

void reject_request(rdmacm::CmChannel* channel, verbs::CmId id, wire::RejectReason reason) {
  RMSG_LOG(info, "rdma: rejecting a connect request (reason %d)", static_cast<int>(reason));
  wire::Hello h;
  h.kind = wire::HelloKind::reject;
  h.reason = reason;
  const auto data = wire::encode_hello(h);
  rdma_reject(id.get(), data.data(), static_cast<std::uint8_t>(data.size()));
  if (channel != nullptr) channel->retire(std::move(id));
}

}  // namespace rmsg::rdma
