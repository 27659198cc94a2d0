// CompletionChannel: one completion channel per (loop, device), shared by the CQs of every
// connection structure made for that loop on that device, instead of one channel (one fd)
// per CQ. Descriptors per RDMA connection are then none of rmsg's own: the loop holds one
// fd per device here and the rdma_cm event channel (rdmacm::CmChannel).
//
// A CQ names its CqEventSink as its cq_context (resources.cc); the channel reads an event,
// and calls the sink's handler: the structure's current owner (a stream, a Recycler),
// which counts the event for acking (verbs::Cq::note_events) and polls. A sink without a
// handler (an idle structure) has the event acked here. A CQ's pending events are dropped
// by the kernel when the CQ is destroyed, so an event never names a destroyed CQ.
//
// One event per readable callback: the fd is level-triggered, so the loop comes back at
// once for the next one; reading until EAGAIN would add a failing read(2) to every wakeup
// of the ping-pong (the data path's instruction budget), and each armed CQ raises at most
// one event before it is armed again, so what waits is bounded by the CQs.
//
// Ownership: shared by the structures (ConnResources::channel), which must destroy their
// CQs first; the per-loop registry that finds it is a loop service holding weak
// references, so a channel goes when its device's last structure goes (a removed
// Soft-RoCE device is freed only once every object on it is closed). A channel that
// outlives its loop (a structure destroyed after it) is only closed.
// Threading: the loop thread (made before the loop runs: any one thread).
#pragma once

#include <functional>
#include <memory>

#include "rmsg/event_loop.h"
#include "rmsg/result.h"
#include "verbs/verbs.h"

namespace rmsg::rdma {

// What a CQ's cq_context points to. Its address must stay fixed while the CQ lives.
struct CqEventSink {
  std::function<void()> on_event;  // {}: nobody waits, the event is only acked
};

class CompletionChannel {
 public:
  // The channel of `loop` for device `ctx`, created (and watched) on first use. Errors:
  // those of ibv_create_comp_channel and EventLoop::watch (EMFILE, ENOMEM).
  static Result<std::shared_ptr<CompletionChannel>> for_loop(EventLoop& loop, ibv_context* ctx);

  CompletionChannel(const CompletionChannel&) = delete;
  CompletionChannel& operator=(const CompletionChannel&) = delete;
  CompletionChannel(CompletionChannel&&) = delete;
  CompletionChannel& operator=(CompletionChannel&&) = delete;
  ~CompletionChannel();

  ibv_comp_channel* get() const noexcept { return channel_.get(); }

  class Registry;  // the loop service (completion_channel.cc)

 private:
  CompletionChannel(std::weak_ptr<Registry> registry, verbs::CompChannel channel)
      : registry_(std::move(registry)), channel_(std::move(channel)) {}
  void on_readable();

  std::weak_ptr<Registry> registry_;
  verbs::CompChannel channel_;
  WatchId watch_ = 0;
};

}  // namespace rmsg::rdma
