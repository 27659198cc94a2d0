#include "verbs/async_events.h"
#include "verbs/seams.h"

#include <fcntl.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <vector>

#include "rmsg/log.h"

namespace rmsg::verbs {

struct AsyncEntry {
  EventLoop* loop;
  AsyncTarget target;
  AsyncHandler handler;
  bool active = true;  // guarded by the registry's mutex
};

namespace {

struct LoopWatch {
  WatchId watch = 0;
  int refs = 0;
};

// Keyed by context address, which a device made again may get again: a context is
// forgotten with its last registration (a removed device's contexts go with theirs), so a
// new one at the same address is set up anew.
struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<AsyncEntry>> entries;
  std::map<std::pair<ibv_context*, EventLoop*>, LoopWatch> watches;
  std::map<ibv_context*, bool> nonblocking;
};

// Under the mutex: forgets `ctx` when no loop watches it any more.
void forget_if_unwatched(Registry& r, ibv_context* ctx) {
  auto it = r.watches.lower_bound({ctx, nullptr});
  if (it == r.watches.end() || it->first.first != ctx) r.nonblocking.erase(ctx);
}

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: loops may outlive statics
  return *r;
}

bool concerns(const AsyncEntry& e, ibv_context* ctx, const ibv_async_event& ev) {
  if (e.target.context != ctx) return false;
  switch (ev.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return ev.element.qp == e.target.qp;
    case IBV_EVENT_CQ_ERR:
      return ev.element.cq == e.target.cqs[0] || ev.element.cq == e.target.cqs[1];
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_GID_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
      return ev.element.port_num == e.target.port;
    case IBV_EVENT_DEVICE_FATAL:
      return true;
    default:
      return false;  // SRQ events: rmsg uses no SRQ
  }
}

void deliver(const std::shared_ptr<AsyncEntry>& e, const AsyncEvent& ev) {
  {
    std::lock_guard lock(registry().mu);
    if (!e->active) return;
  }
  AsyncHandler handler = e->handler;  // the handler may destroy the registration
  handler(ev);
}

AsyncEvent to_event(const ibv_async_event& ev) {
  AsyncEvent out{ev.event_type, 0};
  if (ev.event_type >= IBV_EVENT_PORT_ACTIVE && ev.event_type <= IBV_EVENT_CLIENT_REREGISTER) {
    out.port = static_cast<std::uint8_t>(ev.element.port_num);
  }
  return out;
}

// Posts `out` (made from `ev`) to the owners it concerns on other loops; returns those on
// `loop`.
std::vector<std::shared_ptr<AsyncEntry>> dispatch(EventLoop& loop, ibv_context* ctx,
                                                  const ibv_async_event& ev,
                                                  const AsyncEvent& out) {
  std::vector<std::shared_ptr<AsyncEntry>> mine;
  auto& r = registry();
  std::lock_guard lock(r.mu);
  for (auto& e : r.entries) {
    if (!concerns(*e, ctx, ev)) continue;
    if (e->loop == &loop) {
      mine.push_back(e);
    } else {
      // Posted under the lock: an owner unregisters (under it) before its loop dies.
      e->loop->post([w = std::weak_ptr<AsyncEntry>(e), out] {
        if (auto entry = w.lock()) deliver(entry, out);
      });
    }
  }
  return mine;
}

// On `loop`'s thread: reads every queued event of `ctx`.
void drain(EventLoop& loop, ibv_context* ctx) {
  for (;;) {
    ibv_async_event ev{};
    if (ibv_get_async_event(ctx, &ev) != 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        RMSG_LOG(warn, "ibv_get_async_event: errno %d", errno);
      }
      return;
    }
    RMSG_LOG(info, "rdma device %s: async event %s", ibv_get_device_name(ctx->device),
             ibv_event_type_str(ev.event_type));
    const AsyncEvent out = to_event(ev);
    const auto mine = dispatch(loop, ctx, ev, out);
    ibv_ack_async_event(&ev);  // before the handlers: one may destroy the QP it names
    for (const auto& e : mine) deliver(e, out);
  }
}

Result<void> make_nonblocking(Registry& r, ibv_context* ctx) {
  if (r.nonblocking[ctx]) return {};
  const int flags = fcntl(ctx->async_fd, F_GETFL);
  if (flags < 0 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return errno_code(errno);
  }
  r.nonblocking[ctx] = true;
  return {};
}

}  // namespace

Result<AsyncRegistration> watch_async_events(EventLoop& loop, const AsyncTarget& target,
                                             AsyncHandler handler) {
  auto entry = std::make_shared<AsyncEntry>(AsyncEntry{&loop, target, std::move(handler)});
  auto& r = registry();
  std::lock_guard lock(r.mu);
  RMSG_TRY(make_nonblocking(r, target.context));
  auto& lw = r.watches[{target.context, &loop}];
  if (lw.refs == 0) {
    ibv_context* ctx = target.context;
    auto w =
        loop.watch(ctx->async_fd, kReadable, [&loop, ctx](std::uint32_t) { drain(loop, ctx); });
    if (!w) {
      r.watches.erase({target.context, &loop});
      forget_if_unwatched(r, target.context);
      return w.error();
    }
    lw.watch = w.value();
  }
  ++lw.refs;
  r.entries.push_back(entry);
  return AsyncRegistration(std::move(entry));
}

void AsyncRegistration::reset() {
  if (!entry_) return;
  auto& r = registry();
  std::lock_guard lock(r.mu);
  entry_->active = false;
  std::erase(r.entries, entry_);
  auto it = r.watches.find({entry_->target.context, entry_->loop});
  if (it != r.watches.end() && --it->second.refs == 0) {
    entry_->loop->unwatch(it->second.watch);
    r.watches.erase(it);
    forget_if_unwatched(r, entry_->target.context);
  }
  entry_.reset();
}

void route_async_event(EventLoop& loop, ibv_context* context, const ibv_async_event& event) {
  const AsyncEvent out = to_event(event);
  for (const auto& e : dispatch(loop, context, event, out)) deliver(e, out);
}

}  // namespace rmsg::verbs
