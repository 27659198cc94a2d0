// Recycler: brings one released connection structure back to a reusable state (S1.3),
// without blocking, on the loop:
//
//   QP in ERR (the stream left it there) -> a signalled marker SEND is posted, which the
//   QP flushes after every earlier send -> both CQs are reaped from their completion
//   channels until the marker and exactly `recv_posted` receive completions of the
//   current generation came back (their events through the loop's completion channel) -> QP to
//   RESET -> (optionally) the old rdma_cm id's TIMEWAIT_EXIT, or `timewait_limit` after RESET when
//   it does not come (the timewait it stands for has passed by then) -> done(true). The structure
//   is then the caller's (take()).
//
// Any completion with an error other than a flush, a failed verb, or the deadline passing
// ends it with done(false): the caller destroys the structure (a failed QP is never
// reused). Completions of earlier generations are counted as stale and dropped.
//
// Threading: loop thread only. done() is the last thing a Recycler does in a callback,
// so the caller may destroy it there. The old id is retired (destroyed after its event is
// acked) when the Recycler is destroyed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "loop/alive.h"
#include "rdma/resources.h"
#include "rdmacm/cm_channel.h"
#include "rmsg/event_loop.h"

namespace rmsg::rdma {

class Recycler final : public rdmacm::CmEventHandler {
 public:
  using Done = std::function<void(Recycler&, bool ok)>;

  struct Stats {
    std::uint32_t flushed = 0;      // flushed completions of this generation (marker included)
    std::uint32_t stale = 0;        // completions of earlier generations
    bool timewait_missing = false;  // parked after timewait_limit without TIMEWAIT_EXIT
  };

  Recycler(EventLoop& loop, std::shared_ptr<rdmacm::CmChannel> channel,
           rdma::ReleasedStructure released, bool wait_timewait, Duration timewait_limit,
           Clock::time_point deadline, Done done);
  Recycler(const Recycler&) = delete;
  Recycler& operator=(const Recycler&) = delete;
  Recycler(Recycler&&) = delete;
  Recycler& operator=(Recycler&&) = delete;
  ~Recycler();

  // Posts the marker and starts reaping; may call done() before returning only through
  // the loop (deferred), never from inside. An error means done() will not come.
  Result<void> start();
  // The deadline checks of the owner's tick: done(false) once the reaping deadline
  // passed, done(true) once the timewait limit did.
  void check_deadline(Clock::time_point now);

  rdma::ConnResources& resources() const { return *res_; }
  std::unique_ptr<rdma::ConnResources> take() { return std::move(res_); }
  const Stats& stats() const noexcept { return stats_; }

  void on_cm_event(const rdma_cm_event& event) override;

 private:
  enum class Phase { reaping, timewait, done };

  void on_cq_event(bool send);
  void poll();
  bool reap(ibv_cq* cq, bool send);
  void after_reaped();
  void finish(bool ok);
  void unwatch();

  EventLoop& loop_;
  std::shared_ptr<rdmacm::CmChannel> channel_;
  std::unique_ptr<rdma::ConnResources> res_;
  verbs::CmId id_;  // the old id, retired in the destructor
  bool wait_timewait_;
  bool timewait_exited_;
  Duration timewait_limit_;
  Clock::time_point timewait_deadline_ = Clock::time_point::max();
  Clock::time_point deadline_;
  Done done_;
  Phase phase_ = Phase::reaping;
  bool marker_seen_ = false;
  Stats stats_;
  Alive<Recycler> alive_{loop_, this};  // guards the deferred first poll
};

}  // namespace rmsg::rdma
