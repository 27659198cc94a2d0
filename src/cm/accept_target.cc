#include "cm/accept_target.h"

#include <cerrno>

#include "rmsg/log.h"

namespace rmsg::cm {

void TargetState::open(Adopt adopt) {
  const std::lock_guard lock(mutex_);
  if (loop_ == nullptr) return;
  adopt_ = std::make_shared<Adopt>(std::move(adopt));
}

void TargetState::close() {
  const std::lock_guard lock(mutex_);
  loop_ = nullptr;
  channel_ = nullptr;
  adopt_.reset();
}

Result<void> TargetState::hand_off(verbs::CmId& id, std::span<const std::byte> request,
                                   const rdma::wire::Hello& hello) {
  const std::lock_guard lock(mutex_);
  if (loop_ == nullptr || !adopt_) return Errc::cancelled;
  // Same channel (two managers on one loop): nothing to move.
  if (id->channel != channel_ && rdma_migrate_id(id.get(), channel_) != 0) {
    return errno_code(errno);
  }
  // A Task is copyable: the id rides in a shared owner (a task dropped unrun destroys it).
  auto owned = std::make_shared<verbs::CmId>(std::move(id));
  loop_->post([adopt = adopt_, owned, data = std::vector<std::byte>(request.begin(), request.end()),
               hello] { (*adopt)(std::move(*owned), data, hello); });
  return {};
}

std::function<bool(const rdma_cm_event&, const rdma::wire::Hello&)> make_route_hook(
    AcceptRouter router, std::shared_ptr<TargetState> own,
    std::shared_ptr<rdmacm::CmChannel> channel, std::weak_ptr<ManagerStats> stats) {
  return [router = std::move(router), own = std::move(own), channel = std::move(channel),
          stats = std::move(stats)](const rdma_cm_event& event,
                                    const rdma::wire::Hello& hello) -> bool {
    AcceptTarget target = router(hello.affinity);
    if (!TargetAccess::state(target) || TargetAccess::state(target) == own) return false;
    const auto data = rdmacm::cm_private_data(event);
    // rdma_migrate_id would wait for this very event's ack: hand it off after the ack.
    channel->after_ack([target, id = event.id,
                        request = std::vector<std::byte>(data.begin(), data.end()), hello,
                        channel = channel.get(), stats] {
      verbs::CmId owned(id);
      auto r = TargetAccess::state(target)->hand_off(owned, request, hello);
      auto st = stats.lock();
      if (r) {
        if (st) st->add("routing.handed_off");
        return;
      }
      const bool gone = r.is(Errc::cancelled);
      RMSG_LOG(info, "cm: routing a connect request (affinity %llu) failed: %s",
               static_cast<unsigned long long>(hello.affinity),
               gone ? "the target is gone" : r.error().message().c_str());
      if (st) st->add(gone ? "routing.target_gone" : "routing.migrate_failed");
      rdma::reject_request(channel, std::move(owned), rdma::wire::RejectReason::resources);
    });
    return true;
  };
}

TargetState::Adopt make_adopt(std::weak_ptr<rdma::Acceptor> acceptor,
                              std::weak_ptr<ManagerStats> stats) {
  return [acceptor = std::move(acceptor), stats = std::move(stats)](
             verbs::CmId id, std::span<const std::byte> request, const rdma::wire::Hello& hello) {
    auto a = acceptor.lock();
    if (!a) {  // the target's manager went after the hand-off
      return rdma::reject_request(nullptr, std::move(id), rdma::wire::RejectReason::resources);
    }
    if (auto st = stats.lock()) st->add("routing.adopted");
    a->accept(std::move(id), request, hello);
  };
}

}  // namespace rmsg::cm
