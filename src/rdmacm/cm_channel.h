// CmChannel: one non-blocking rdma_cm event channel per EventLoop, watched by the loop,
// that reads every queued event (until EAGAIN) and dispatches it to the handler attached
// to its cm id (for CONNECT_REQUEST: to the listening id's handler).
//
// Ownership: a service of the loop (EventLoop::set_service), created on first use and
// destroyed with the loop; every listener and connection on the loop shares it
// (std::shared_ptr), so ids accepted by a listener keep their channel after the listener is
// gone, whichever thread created them before the loop first ran.
// Threading: loop thread only. The loop must outlive the channel's other owners.
//
// One channel per loop, never one per id. An id moves between channels only when a
// connection manager hands a connect request to another loop's manager (routing accepts,
// docs/connection-manager.md): rdma_migrate_id blocks until the id's events are acked, so
// it would deadlock inside this channel's own dispatch; the handler defers it with
// after_ack(), which runs once the CONNECT_REQUEST is acked and before the next event is
// read.
//
// Each event is acked right after its handler returns. A handler may destroy its own cm
// id only through retire(): rdma_destroy_id blocks until the id's events are acked, so
// an id retired during dispatch is destroyed after the ack (on one thread, destroying it
// inside the handler would deadlock).
//
// After a DEVICE_REMOVAL event is acked, the channel has librdmacm re-read the device list,
// so that librdmacm closes the removed device once its last id is gone: the removal of a
// Soft-RoCE device (no context disassociation) waits for that. Handlers of DEVICE_REMOVAL
// must drop their verbs objects on that device and retire their ids at once. Removal
// observers (add_removal_observer) hear of every DEVICE_REMOVAL too, for objects on the
// device that no id stands for (a connection manager's idle structures).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "rmsg/event_loop.h"
#include "rmsg/result.h"
#include "verbs/verbs.h"

namespace rmsg::rdmacm {

class CmEventHandler {
 public:
  // `event` is valid until the handler returns; it is acked afterwards.
  virtual void on_cm_event(const rdma_cm_event& event) = 0;

 protected:
  CmEventHandler() = default;
  CmEventHandler(const CmEventHandler&) = default;
  CmEventHandler& operator=(const CmEventHandler&) = default;
  CmEventHandler(CmEventHandler&&) = default;
  CmEventHandler& operator=(CmEventHandler&&) = default;
  ~CmEventHandler() = default;
};

class CmChannel : public std::enable_shared_from_this<CmChannel> {
 public:
  // The loop's channel, created on first use. Errors: ENODEV/ENOENT without an RDMA stack.
  static Result<std::shared_ptr<CmChannel>> for_loop(EventLoop& loop);

  CmChannel(const CmChannel&) = delete;
  CmChannel& operator=(const CmChannel&) = delete;
  CmChannel(CmChannel&&) = delete;
  CmChannel& operator=(CmChannel&&) = delete;
  ~CmChannel();

  EventLoop& loop() const noexcept { return loop_; }
  rdma_event_channel* get() const noexcept { return channel_.get(); }

  // rdma_create_id on this channel, attached to `handler`.
  Result<verbs::CmId> create_id(CmEventHandler* handler);
  // Routes the events of `id` to `handler` (replacing any earlier one) / stops routing.
  void attach(rdma_cm_id* id, CmEventHandler* handler);
  void detach(rdma_cm_id* id);
  // Detaches and destroys `id` now, or after the event being dispatched is acked.
  void retire(verbs::CmId id);
  // Runs `task` on this thread once the event being dispatched is acked (before the next
  // one is read), or now outside a dispatch. For what must not run before the ack:
  // rdma_migrate_id of the event's id.
  void after_ack(std::function<void()> task);

  // `observer` is called with the device context of every DEVICE_REMOVAL read, after the
  // id's own handler and before the event is acked and librdmacm re-reads its device list:
  // the context is still open, and this is the last moment to destroy verbs objects on it
  // (librdmacm closes it once its last id is gone). Ids retired there are destroyed after
  // the ack. Returns a token for remove_removal_observer.
  using RemovalObserver = std::function<void(ibv_context*)>;
  std::uint64_t add_removal_observer(RemovalObserver observer);
  void remove_removal_observer(std::uint64_t token);

  // Reads and dispatches every queued event (the loop calls this when the fd is readable).
  void drain();

 private:
  CmChannel(EventLoop& loop, verbs::EventChannel channel);
  void notify_removal(ibv_context* ctx);

  EventLoop& loop_;
  verbs::EventChannel channel_;
  WatchId watch_ = 0;
  std::unordered_map<rdma_cm_id*, CmEventHandler*> handlers_;
  std::map<std::uint64_t, RemovalObserver> removal_observers_;
  std::uint64_t next_observer_ = 0;
  bool dispatching_ = false;
  std::vector<std::function<void()>> after_ack_;
  std::vector<verbs::CmId> retired_;  // destroyed before the channel (declared after it)
};

}  // namespace rmsg::rdmacm
