// StructurePool's background work (structure_pool.h, "Background work"): a failed
// structure taken apart, a released one's recycling started, a spare built - one verbs
// call per tick of the manager (10 ms), while no connect of the manager is under way.
// Measured under Soft-RoCE in TCG (docs/perf.md, Failover), where a verbs system call
// takes 1-5 ms: a whole structure cost 3-15 ms to destroy, 6-130 ms to build and 15 ms to
// start recycling in one callback, which a failover's switch waited for; done one call per
// loop iteration instead, a few calls still landed in every round trip of the traffic
// (the client's and the server's iterations), 20-70 ms gaps. One per tick leaves at most
// one in a round trip.
#include <algorithm>

#include "cm/structure_pool.h"
#include "rmsg/log.h"

namespace rmsg::cm {

void StructurePool::destroy_later(std::unique_ptr<rdma::ConnResources> res, verbs::CmId id,
                                  const char* counter) {
  // The old id goes now, as without the option: destroyed while its DREQ is still
  // outstanding (just sent) the kernel cancels it at once; later, it may wait for the
  // DREQ's own timeout in rdma_destroy_id (tests/softroce/README.md, Traps).
  channel_->retire(std::move(id));
  if (!options_.deferred_teardown) return destroy(std::move(res), counter);
  if (!res) return;
  stats_->add(counter);
  stats_->add("structures.destroyed");
  stats_->add("structures.deferred_teardowns");
  Chore c;
  c.res = std::move(res);
  chores_.push_back(std::move(c));
  wake_tick_();
}

void StructurePool::want_spare(const ReuseKey& key, ibv_context* ctx,
                               const rdma::Geometry& geometry) {
  if (!options_.spares || options_.max_idle == 0 || idle_.count(key) > 0) return;
  const bool building = std::any_of(chores_.begin(), chores_.end(),
                                    [&](const Chore& c) { return c.build && c.key == key; });
  if (building) return;
  Chore c;
  c.build = std::make_unique<rdma::ResourceBuilder>(loop_, ctx, geometry, pd_for(ctx));
  c.key = key;
  chores_.push_back(std::move(c));
  RMSG_LOG(debug, "cm: a spare structure for %s queued", key.to_string().c_str());
  wake_tick_();
}

std::size_t StructurePool::recycling_or_queued() const noexcept {
  std::size_t n = recyclers_.size();
  for (const auto& c : chores_) n += c.recycle.res ? 1 : 0;
  return n;
}

void StructurePool::recycle_later(rdma::ReleasedStructure released) {
  if (!options_.deferred_teardown) return start_recycling(std::move(released));
  Chore c;
  c.recycle = std::move(released);
  chores_.push_back(std::move(c));
  wake_tick_();
}

// From the tick (outside any CM event's dispatch).
// A manager that is never quiet (connects all the time) still gets through its chores:
// after kChoreWait without a quiet tick, one step per tick regardless.
void StructurePool::run_chore(Clock::time_point now) {
  if (chores_.empty()) {
    not_quiet_since_ = Clock::time_point::max();
    return;
  }
  if (!quiet_) {
    not_quiet_since_ = std::min(not_quiet_since_, now);
    if (now - not_quiet_since_ < kChoreWait) return;
  } else {
    not_quiet_since_ = Clock::time_point::max();
  }
  if (chore_step(chores_.front())) chores_.pop_front();
}

bool StructurePool::chore_step(Chore& c) {
  if (c.recycle.res) {
    start_recycling(std::move(c.recycle));
    return true;
  }
  if (c.res) {
    if (rdma::release_one(*c.res)) {
      RMSG_LOG(debug, "cm: structure %u: one object destroyed", c.res->serial);
      return false;
    }
    RMSG_LOG(debug, "cm: structure %u taken apart", c.res->serial);
    c.res.reset();
    return true;
  }
  if (!c.build) return true;
  auto done = c.build->step();
  if (!done) {
    RMSG_LOG(info, "cm: building a spare structure failed: %s", done.error().message().c_str());
    stats_->add("structures.spare_failed");
    return true;
  }
  if (!done.value()) {
    RMSG_LOG(debug, "cm: spare: step %d built", c.build->steps());
    return false;
  }
  auto res = c.build->take();
  next_serial_ = rdma::next_serial(next_serial_);
  res->serial = next_serial_;
  stats_->add("structures.created");
  stats_->add("structures.spares");
  RMSG_LOG(debug, "cm: spare structure %u (qp %u) for %s", res->serial, res->qp->qp_num,
           c.key.to_string().c_str());
  for (auto& evicted : idle_.put(c.key, std::move(res), loop_.now())) {
    destroy(std::move(evicted), "structures.evicted");
  }
  return true;
}

void StructurePool::drop_chores(ibv_context* ctx) {
  auto device = [](const Chore& c) -> const ibv_context* {
    if (c.recycle.res) return c.recycle.res->context;
    if (c.res) return c.res->context;
    return c.build ? c.build->resources().context : nullptr;
  };
  std::deque<Chore> kept;
  for (Chore& c : chores_) {
    if (ctx != nullptr && device(c) != ctx) {
      kept.push_back(std::move(c));
      continue;
    }
    channel_->retire(std::move(c.recycle.id));
    if (c.recycle.res) keys_.erase(c.recycle.res.get());
    c.recycle.res.reset();
    c.res.reset();
    c.build.reset();
  }
  chores_ = std::move(kept);
}

}  // namespace rmsg::cm
