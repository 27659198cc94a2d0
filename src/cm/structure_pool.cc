#include "cm/structure_pool.h"

#include "rmsg/log.h"

namespace rmsg::cm {

StructurePool::StructurePool(EventLoop& loop, std::shared_ptr<CmChannel> channel,
                             const ConnectionManagerOptions& options,
                             std::shared_ptr<ManagerStats> stats, std::function<void()> wake_tick)
    : loop_(loop),
      channel_(std::move(channel)),
      options_(options),
      stats_(std::move(stats)),
      wake_tick_(std::move(wake_tick)),
      idle_(options.max_idle, options.max_idle_time) {}

StructurePool::~StructurePool() {
  for (auto& [raw, recycler] : recyclers_) destroy(recycler->take(), "structures.dropped");
  recyclers_.clear();
  for (auto& res : idle_.clear()) destroy(std::move(res), "structures.dropped");
}

std::shared_ptr<verbs::Pd> StructurePool::pd_for(ibv_context* ctx) {
  if (auto pd = pds_[ctx].lock()) return pd;
  auto pd = verbs::alloc_pd(ctx);
  if (!pd) return nullptr;  // create_conn_resources then tries itself and reports why
  auto shared = std::make_shared<verbs::Pd>(std::move(pd).value());
  pds_[ctx] = shared;
  return shared;
}

Result<std::unique_ptr<rdma::ConnResources>> StructurePool::acquire(const ReuseKey& key,
                                                                    ibv_context* ctx,
                                                                    const rdma::Geometry& geometry,
                                                                    bool& reused) {
  if (auto idle = idle_.take(key)) {
    reused = true;
    stats_->add("structures.reused");
    keys_.insert_or_assign(idle->get(), key);
    return std::move(*idle);
  }
  reused = false;
  auto res = rdma::create_conn_resources(ctx, geometry, pd_for(ctx));
  if (!res) {
    stats_->add("structures.create_failed");
    return res.error();
  }
  res.value()->serial = ++next_serial_;
  stats_->add("structures.created");
  // Overwrites a stale entry: a structure freed without release (device removal) at
  // this same address.
  keys_.insert_or_assign(res.value().get(), key);
  RMSG_LOG(debug, "cm: new structure %u (qp %u) for %s", res.value()->serial,
           res.value()->qp->qp_num, key.to_string().c_str());
  return res;
}

std::function<void(rdma::ReleasedStructure)> StructurePool::release_hook() {
  return [weak = weak_from_this(), channel = channel_, stats = stats_](rdma::ReleasedStructure r) {
    if (auto self = weak.lock()) return self->release(std::move(r));
    channel->retire(std::move(r.id));  // the manager is gone: nothing to recycle into
    if (r.res) stats->add("structures.destroyed");
  };
}

void StructurePool::release(rdma::ReleasedStructure r) {
  if (!r.res) return;
  if (!r.reusable || !keys_.contains(r.res.get()) || options_.max_idle == 0) {
    channel_->retire(std::move(r.id));
    keys_.erase(r.res.get());
    return destroy(std::move(r.res),
                   r.reusable ? "structures.not_kept" : "structures.not_reusable");
  }
  const auto deadline = Clock::now() + options_.recycle_timeout;
  auto recycler = std::make_unique<Recycler>(
      loop_, channel_, std::move(r), options_.wait_timewait, options_.timewait_limit, deadline,
      [this](Recycler& done, bool ok) { on_recycled(done, ok); });
  Recycler* raw = recycler.get();
  if (auto started = raw->start(); !started) {
    RMSG_LOG(warn, "cm: recycling failed to start: %s", started.error().message().c_str());
    keys_.erase(&raw->resources());
    return destroy(raw->take(), "structures.recycle_failed");
  }
  recyclers_.emplace(raw, std::move(recycler));
  wake_tick_();
}

void StructurePool::on_recycled(Recycler& recycler, bool ok) {
  auto node = recyclers_.extract(&recycler);  // destroyed on return (retires the old id)
  auto res = recycler.take();
  stats_->add("structures.flushed", recycler.stats().flushed);
  stats_->add("structures.stale_completions", recycler.stats().stale);
  if (recycler.stats().timewait_missing) stats_->add("structures.timewait_missing");
  auto key = keys_.extract(res.get());
  if (!ok || key.empty()) return destroy(std::move(res), "structures.recycle_failed");
  stats_->add("structures.recycled");
  for (auto& evicted : idle_.put(key.mapped(), std::move(res), Clock::now())) {
    destroy(std::move(evicted), "structures.evicted");
  }
  wake_tick_();
}

bool StructurePool::tick(Clock::time_point now) {
  std::vector<Recycler*> all;
  for (auto& [raw, recycler] : recyclers_) all.push_back(raw);
  for (Recycler* r : all) {
    if (recyclers_.contains(r)) r->check_deadline(now);  // may remove r (done callback)
  }
  for (auto& res : idle_.expire(now)) destroy(std::move(res), "structures.expired");
  return !recyclers_.empty() || idle_.size() > 0;
}

void StructurePool::drop_idle() {
  for (auto& res : idle_.clear()) destroy(std::move(res), "structures.dropped");
}

void StructurePool::destroy(std::unique_ptr<rdma::ConnResources> res, const char* counter) {
  if (!res) return;
  stats_->add(counter);
  stats_->add("structures.destroyed");
  res.reset();
}

}  // namespace rmsg::cm
