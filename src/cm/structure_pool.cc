#include "cm/structure_pool.h"

#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include "rmsg/log.h"

namespace rmsg::cm {

StructurePool::StructurePool(EventLoop& loop, std::shared_ptr<rdmacm::CmChannel> channel,
                             const ConnectionManagerOptions& options,
                             std::shared_ptr<ManagerStats> stats, std::function<void()> wake_tick)
    : loop_(loop),
      channel_(std::move(channel)),
      options_(options),
      stats_(std::move(stats)),
      wake_tick_(std::move(wake_tick)),
      idle_(options.max_idle, options.max_idle_time) {
  // `this` is safe: the destructor removes the observer.
  removal_observer_ =
      channel_->add_removal_observer([this](ibv_context* ctx) { drop_device(ctx); });
}

StructurePool::~StructurePool() {
  channel_->remove_removal_observer(removal_observer_);
  drop_chores(nullptr);
  for (auto& [raw, recycler] : recyclers_) {
    auto res = recycler->take();
    recycler.reset();  // unwatches its completion channels before they close
    destroy(std::move(res), "structures.dropped");
  }
  recyclers_.clear();
  for (auto& res : idle_.clear()) destroy(std::move(res), "structures.dropped");
  for (auto& [ctx, device] : devices_) channel_->retire(std::move(device.sentinel));
}

void StructurePool::drop_device(ibv_context* ctx) {
  const bool known = pds_.contains(ctx) || devices_.contains(ctx);
  std::size_t dropped = chores_.size();
  drop_chores(ctx);
  dropped -= chores_.size();
  std::vector<rdma::Recycler*> doomed;
  for (auto& [raw, recycler] : recyclers_) {
    if (recycler->resources().context == ctx) doomed.push_back(raw);
  }
  for (rdma::Recycler* raw : doomed) {
    auto node = recyclers_.extract(raw);
    keys_.erase(&raw->resources());
    auto res = raw->take();
    node.mapped().reset();  // stops watching the completion channels, retires the old id
    destroy(std::move(res), "structures.device_removed");
    ++dropped;
  }
  for (auto& res : idle_.take_if([ctx](const auto& r) { return r->context == ctx; })) {
    destroy(std::move(res), "structures.device_removed");
    ++dropped;
  }
  // Structures still in streams hold the PD; each stream drops its own on its removal event.
  pds_.erase(ctx);
  if (auto it = devices_.find(ctx); it != devices_.end()) {
    channel_->retire(std::move(it->second.sentinel));
    devices_.erase(it);  // may be inside the DEVICE_FATAL handler: the registry allows it
  }
  if (!known && dropped == 0) return;  // another device, or one seen already
  stats_->add("devices.removed");
  RMSG_LOG(info, "cm: rdma device %s removed: %zu pooled structures destroyed",
           ibv_get_device_name(ctx->device), dropped);
}

// Binds an id of our own to the connection's local address (any port), which puts it on
// the same device: its DEVICE_REMOVAL comes even when no connection is left there. Without
// one, removal is still seen through the ids of live connections and recycling structures.
verbs::CmId StructurePool::make_sentinel(rdma_cm_id* id) {
  sockaddr_storage addr{};
  std::memcpy(&addr, rdma_get_local_addr(id), sizeof addr);
  if (addr.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&addr)->sin_port = 0;
  } else if (addr.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = 0;
  } else {
    return {};
  }
  auto sentinel = channel_->create_id(this);
  if (!sentinel) return {};
  if (rdma_bind_addr(sentinel->get(), reinterpret_cast<sockaddr*>(&addr)) != 0 ||
      sentinel->get()->verbs != id->verbs) {
    RMSG_LOG(debug, "cm: no device sentinel for %s (errno %d)",
             ibv_get_device_name(id->verbs->device), errno);
    channel_->retire(std::move(sentinel).value());
    return {};
  }
  return std::move(sentinel).value();
}

void StructurePool::watch_device(rdma_cm_id* id) {
  ibv_context* ctx = id->verbs;
  if (devices_.contains(ctx)) return;
  DeviceWatch device{make_sentinel(id), {}};
  // A registration with no QP or CQ hears only DEVICE_FATAL (and port events of port 0:
  // none).
  auto fatal = verbs::watch_async_events(loop_, verbs::AsyncTarget{ctx, nullptr, {}, 0},
                                         [this, ctx](const verbs::AsyncEvent& ev) {
                                           if (ev.type == IBV_EVENT_DEVICE_FATAL) drop_device(ctx);
                                         });
  if (fatal) device.fatal = std::move(fatal).value();
  devices_.emplace(ctx, std::move(device));
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
                                                                    rdma_cm_id* id,
                                                                    const rdma::Geometry& geometry,
                                                                    bool& reused) {
  ibv_context* ctx = id->verbs;
  while (auto idle = idle_.take(key)) {
    // The key names the device, not its context: one of a device made again under the
    // same name is never taken (its structures went with the removal; this is a backstop).
    if (idle->get()->context != ctx) {
      destroy(std::move(*idle), "structures.device_removed");
      continue;
    }
    reused = true;
    stats_->add("structures.reused");
    RMSG_LOG(debug, "cm: structure %u reused for %s", idle->get()->serial, key.to_string().c_str());
    keys_.insert_or_assign(idle->get(), key);
    return std::move(*idle);
  }
  reused = false;
  RMSG_LOG(debug, "cm: building a structure for %s", key.to_string().c_str());
  watch_device(id);
  auto res = rdma::create_conn_resources(loop_, ctx, geometry, pd_for(ctx));
  if (!res) {
    stats_->add("structures.create_failed");
    return res.error();
  }
  // 16 bits: after 65535 structures the serial wraps, past 0 (which means "outside a
  // manager"). The epoch it goes into is informational; only a live structure's own
  // generation tells its completions apart.
  next_serial_ = rdma::next_serial(next_serial_);
  res.value()->serial = next_serial_;
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
    auto key = keys_.extract(r.res.get());
    // A failed QP: its connection is likely to be made again soon (a failover's probe).
    if (!r.reusable && !key.empty()) want_spare(key.mapped(), r.res->context, r.res->geometry);
    RMSG_LOG(debug, "cm: structure %u not kept", r.res->serial);
    return destroy_later(std::move(r.res), std::move(r.id),
                         r.reusable ? "structures.not_kept" : "structures.not_reusable");
  }
  // Bounded: a mass close must not hold every structure for seconds of timewait.
  if (options_.max_recycling != 0 && recycling_or_queued() >= options_.max_recycling) {
    keys_.erase(r.res.get());
    RMSG_LOG(debug, "cm: structure %u not recycled (max_recycling)", r.res->serial);
    return destroy_later(std::move(r.res), std::move(r.id), "structures.recycle_full");
  }
  // Ended by an error: kept, but back only after the timewait (seconds); a spare covers
  // the reconnect that is likely to come before.
  if (r.abnormal) want_spare(keys_.at(r.res.get()), r.res->context, r.res->geometry);
  recycle_later(std::move(r));
}

void StructurePool::start_recycling(rdma::ReleasedStructure r) {
  const auto deadline = loop_.now() + options_.recycle_timeout;
  auto recycler = std::make_unique<rdma::Recycler>(
      loop_, channel_, std::move(r), options_.wait_timewait, options_.timewait_limit, deadline,
      [this](rdma::Recycler& done, bool ok) { on_recycled(done, ok); });
  rdma::Recycler* raw = recycler.get();
  if (auto started = raw->start(); !started) {
    RMSG_LOG(warn, "cm: recycling failed to start: %s", started.error().message().c_str());
    keys_.erase(&raw->resources());
    return destroy(raw->take(), "structures.recycle_failed");
  }
  recyclers_.emplace(raw, std::move(recycler));
  RMSG_LOG(debug, "cm: structure %u recycling", raw->resources().serial);
  wake_tick_();
}

void StructurePool::on_recycled(rdma::Recycler& recycler, bool ok) {
  auto node = recyclers_.extract(&recycler);  // destroyed on return (retires the old id)
  auto res = recycler.take();
  stats_->add("structures.flushed", recycler.stats().flushed);
  stats_->add("structures.stale_completions", recycler.stats().stale);
  if (recycler.stats().timewait_missing) stats_->add("structures.timewait_missing");
  auto key = keys_.extract(res.get());
  if (!ok || key.empty()) return destroy(std::move(res), "structures.recycle_failed");
  stats_->add("structures.recycled");
  for (auto& evicted : idle_.put(key.mapped(), std::move(res), loop_.now())) {
    destroy(std::move(evicted), "structures.evicted");
  }
  wake_tick_();
}

bool StructurePool::tick(Clock::time_point now, bool quiet) {
  quiet_ = quiet;
  run_chore(now);
  std::vector<rdma::Recycler*> all;
  for (auto& [raw, recycler] : recyclers_) all.push_back(raw);
  for (rdma::Recycler* r : all) {
    if (recyclers_.contains(r)) r->check_deadline(now);  // may remove r (done callback)
  }
  for (auto& res : idle_.expire(now)) destroy(std::move(res), "structures.expired");
  return !recyclers_.empty() || idle_.size() > 0 || !chores_.empty();
}

void StructurePool::drop_idle() {
  for (auto& res : idle_.clear()) destroy(std::move(res), "structures.dropped");
}

void StructurePool::destroy(std::unique_ptr<rdma::ConnResources> res, const char* counter) {
  if (!res) return;
  stats_->add(counter);
  stats_->add("structures.destroyed");
  const std::uint16_t serial = res->serial;
  res.reset();
  RMSG_LOG(debug, "cm: structure %u destroyed (%s)", serial, counter);
}

}  // namespace rmsg::cm
