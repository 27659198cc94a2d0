// TargetState (behind an AcceptTarget): what a listener's loop needs to hand a connect request to
// another loop's connection manager (routing accepts, docs/connection-manager.md). The one object
// of the manager that crosses threads: the target loop opens and closes it; any loop may
// hand requests to it. Everything else of either manager stays on its own loop.
//
// A hand-off runs on the listener's loop, after the CONNECT_REQUEST was acked
// (rdma_migrate_id blocks until the id's events are acked): under the mutex, while the
// target is open, it migrates the id to the target loop's rdma_cm channel and posts the
// accept to the target loop (EventLoop::post, thread-safe). The target's manager closes
// the state (under the same mutex) before its channel or loop can go, so a hand-off never
// touches a dead target; a posted accept that finds the target's manager gone rejects.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "cm/manager_stats.h"
#include "rdma/rdma_acceptor.h"
#include "rdma/wire.h"
#include "rdmacm/cm_channel.h"
#include "rmsg/connection_manager.h"
#include "rmsg/event_loop.h"
#include "rmsg/result.h"
#include "verbs/verbs.h"

namespace rmsg::cm {

class TargetState {
 public:
  // Runs on the target loop with a handed-off request: its id (on the target's channel,
  // its CONNECT_REQUEST acked), the request's private data and decoded hello.
  using Adopt = std::function<void(verbs::CmId id, std::span<const std::byte> request,
                                   const rdma::wire::Hello& hello)>;

  // Target loop thread; `channel` is that loop's rdma_cm event channel.
  TargetState(EventLoop& loop, rdma_event_channel* channel) : loop_(&loop), channel_(channel) {}
  // Target loop thread: hand-offs are taken (by `adopt`, on the target loop) / refused
  // from now on. close() is final.
  void open(Adopt adopt);
  void close();

  // The listener's loop thread, outside any rdma_cm dispatch. On success `id` is moved
  // out (now on the target's channel, its accept posted). Errors, with `id` left with the
  // caller, still on its channel: Errc::cancelled (the target is closed or was never
  // opened), the errno of rdma_migrate_id.
  Result<void> hand_off(verbs::CmId& id, std::span<const std::byte> request,
                        const rdma::wire::Hello& hello);

 private:
  std::mutex mutex_;
  EventLoop* loop_;               // null once closed
  rdma_event_channel* channel_;   // the target loop's; null once closed
  std::shared_ptr<Adopt> adopt_;  // null until opened
};

// The public handle's two faces inside the library: made from a state, and opened.
struct TargetAccess {
  static AcceptTarget make(std::shared_ptr<TargetState> state) {
    return AcceptTarget(std::move(state));
  }
  static const std::shared_ptr<TargetState>& state(const AcceptTarget& target) {
    return target.state_;
  }
};

// The listener's route hook (rdma::ResourceHooks::route): asks `router`; a request for a
// target other than `own` is handed to it once the event is acked (counted as
// routing.handed_off), or rejected with reason `resources` if the target is gone
// (routing.target_gone) or the migration fails (routing.migrate_failed).
std::function<bool(const rdma_cm_event&, const rdma::wire::Hello&)> make_route_hook(
    AcceptRouter router, std::shared_ptr<TargetState> own,
    std::shared_ptr<rdmacm::CmChannel> channel, std::weak_ptr<ManagerStats> stats);

// The target's side of a hand-off, on its loop: `acceptor` accepts it (routing.adopted),
// or, with the target's manager gone meanwhile, it is rejected with reason `resources`.
TargetState::Adopt make_adopt(std::weak_ptr<rdma::Acceptor> acceptor,
                              std::weak_ptr<ManagerStats> stats);

}  // namespace rmsg::cm
