// StructurePool: the connection manager's reuse table (S1.2, S1.3). It hands out
// connection structures by ReuseKey — an idle one whose key matches, else a new one built
// in the device's shared PD — takes them back when their streams close (through a
// rdma::Recycler, then into the bounded IdlePool), and destroys what fails, what is evicted to
// make room, and what stays idle too long.
//
// Device removal: the idle and recycling structures and the shared PD of a removed device
// are destroyed at once (structures.device_removed), while librdmacm still has the device
// open (a rdmacm::CmChannel removal observer), so the removal does not wait for them and nothing
// is freed on a closed context later. The pool learns of the removal from any id of its
// loop on that device, including a sentinel id it binds to each device it built on (idle
// structures have no id of their own), or from the device's DEVICE_FATAL async event. A
// device made again gets fresh structures.
//
// Background work (ConnectionManagerOptions::deferred_teardown, spares; pool_chores.cc):
// taking a failed structure apart, starting a released one's recycling and building a
// spare are queued as chores, done one verbs call per tick while no connect of the
// manager is under way (pause() when one starts; the tick's `quiet` resumes), so that no
// callback holds the loop for all of them. Device removal and the pool's end do what is
// queued at once.
//
// Ownership: std::shared_ptr, owned by the manager's RDMA half; streams' release hooks
// hold it weakly (release_hook()) so a stream closed after the manager is gone destroys
// its structure instead. Threading: loop thread only.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <unordered_map>

#include "cm/idle_pool.h"
#include "cm/manager_stats.h"
#include "rdma/recycler.h"
#include "rdma/resources.h"
#include "rdmacm/cm_channel.h"
#include "rmsg/connection_manager.h"
#include "verbs/async_events.h"

namespace rmsg::cm {

class StructurePool final : public std::enable_shared_from_this<StructurePool>,
                            private rdmacm::CmEventHandler {
 public:
  StructurePool(EventLoop& loop, std::shared_ptr<rdmacm::CmChannel> channel,
                const ConnectionManagerOptions& options, std::shared_ptr<ManagerStats> stats,
                std::function<void()> wake_tick);
  StructurePool(const StructurePool&) = delete;
  StructurePool& operator=(const StructurePool&) = delete;
  StructurePool(StructurePool&&) = delete;
  StructurePool& operator=(StructurePool&&) = delete;
  ~StructurePool();

  // An idle structure under `key` (QP in RESET; `reused` set), else a new one on the device
  // of `id` (the connection's id, its route resolved).
  Result<std::unique_ptr<rdma::ConnResources>> acquire(const ReuseKey& key, rdma_cm_id* id,
                                                       const rdma::Geometry& geometry,
                                                       bool& reused);
  // The release hook for streams: recycles into this pool while it exists.
  std::function<void(rdma::ReleasedStructure)> release_hook();
  void release(rdma::ReleasedStructure released);

  // Recycling deadlines and idle expiry; `quiet`: no connect of the manager is under way
  // (chores may run). True while anything is recycling, idle or queued.
  bool tick(Clock::time_point now, bool quiet);
  // A connect starts: chores wait for the next quiet tick.
  void pause() noexcept { quiet_ = false; }
  std::size_t chores() const noexcept { return chores_.size(); }
  std::size_t idle() const noexcept { return idle_.size(); }
  std::size_t recycling() const noexcept { return recyclers_.size(); }
  // Recycling, or queued to start it (deferred_teardown): what max_recycling bounds.
  std::size_t recycling_or_queued() const noexcept;
  void drop_idle();
  // Destroys every idle and recycling structure on `ctx` and forgets its PD (the device is
  // being removed). Called by the channel's removal observer.
  void drop_device(ibv_context* ctx);

 private:
  std::shared_ptr<verbs::Pd> pd_for(ibv_context* ctx);
  void watch_device(rdma_cm_id* id);
  verbs::CmId make_sentinel(rdma_cm_id* id);
  // Sentinels' events: DEVICE_REMOVAL is handled by the removal observer; nothing else comes.
  void on_cm_event(const rdma_cm_event& /*event*/) override {}
  void on_recycled(rdma::Recycler& recycler, bool ok);
  void destroy(std::unique_ptr<rdma::ConnResources> res, const char* counter);

  // pool_chores.cc
  struct Chore {
    std::unique_ptr<rdma::ConnResources> res;      // teardown: taken apart object by object
    std::unique_ptr<rdma::ResourceBuilder> build;  // spare: built, then parked under key
    ReuseKey key;
    rdma::ReleasedStructure recycle;  // reusable: its recycling starts (start_recycling)
  };
  // Retires `id` at once; destroy(), or with deferred_teardown a chore (counted as
  // destroyed now).
  void destroy_later(std::unique_ptr<rdma::ConnResources> res, verbs::CmId id, const char* counter);
  // With `spares`, a spare under `key` unless one is idle or being built already.
  void want_spare(const ReuseKey& key, ibv_context* ctx, const rdma::Geometry& geometry);
  // start_recycling(), or with deferred_teardown a chore.
  void recycle_later(rdma::ReleasedStructure released);
  void start_recycling(rdma::ReleasedStructure released);
  void run_chore(Clock::time_point now);
  static constexpr Duration kChoreWait = std::chrono::seconds(1);
  bool chore_step(Chore& chore);       // true when the chore is done
  void drop_chores(ibv_context* ctx);  // null: all

  EventLoop& loop_;
  std::shared_ptr<rdmacm::CmChannel> channel_;
  ConnectionManagerOptions options_;
  std::shared_ptr<ManagerStats> stats_;
  std::function<void()> wake_tick_;
  std::uint16_t next_serial_ = 0;
  std::uint64_t removal_observer_ = 0;
  std::map<ibv_context*, std::weak_ptr<verbs::Pd>> pds_;  // one PD per device context
  // Per device context built on: an id bound to the device's address, whose DEVICE_REMOVAL
  // tells of the removal when no connection is left on the device, and DEVICE_FATAL.
  struct DeviceWatch {
    verbs::CmId sentinel;  // retired through the channel (may be inside its dispatch)
    verbs::AsyncRegistration fatal;
  };
  std::map<ibv_context*, DeviceWatch> devices_;
  // The key of every structure handed out or recycling, by structure.
  std::unordered_map<const rdma::ConnResources*, ReuseKey> keys_;
  // Destroyed before the idle structures (declared after): a recycler retires its id.
  IdlePool<ReuseKey, std::unique_ptr<rdma::ConnResources>, ReuseKeyHash> idle_;
  std::map<rdma::Recycler*, std::unique_ptr<rdma::Recycler>> recyclers_;
  std::deque<Chore> chores_;
  bool quiet_ = true;
  Clock::time_point not_quiet_since_ = Clock::time_point::max();  // chores waiting since
};

}  // namespace rmsg::cm
