// Acceptor: the passive setup after a connect request's hello was checked - admission
// (ResourceHooks::admit), the stream that accepts it, and the hand-over of the stream to
// the application once established. A listener uses one for the requests it reads; a
// connection manager uses one for requests another loop's listener routed to it (their
// ids migrated to this loop's channel, their events acked already).
//
// Ownership: holds the half-accepted streams; destroying it (or clear()) drops them, and
// their peers see a disconnect. Threading: loop thread only.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "loop/alive.h"
#include "rdma/resources.h"
#include "rdma/wire.h"
#include "rdmacm/cm_channel.h"
#include "rmsg/event_loop.h"
#include "rmsg/stream.h"

namespace rmsg::rdma {

class RdmaStream;

class Acceptor {
 public:
  Acceptor(EventLoop& loop, const RdmaOptions& options, ResourceHooks hooks,
           AcceptCallback on_accept, std::shared_ptr<rdmacm::CmChannel> channel);
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;
  Acceptor(Acceptor&&) = delete;
  Acceptor& operator=(Acceptor&&) = delete;
  ~Acceptor();

  // Accepts the request of `id` (on this loop's channel; `request` its private data,
  // `hello` its decoded hello), or rejects it: with RdmaOptions::max_inbound_handshakes
  // requests of this acceptor not yet established (checked first: nothing is built or
  // leased for it), over the admission limit or without a stream, with a reject hello of
  // reason `resources`; if the CM setup fails, as
  // CmConnection::accept does. Inside or outside the channel's dispatch. A request that
  // finds the loop's setup budget for this iteration spent (SetupBudget,
  // RdmaOptions::max_setup_calls_per_iteration) waits, queued in arrival order, for a
  // later iteration; it counts as half-accepted meanwhile.
  void accept(verbs::CmId id, std::span<const std::byte> request, const wire::Hello& hello);
  // Replaces the options, hooks and callback of later requests (and the callback of
  // half-accepted streams).
  void configure(const RdmaOptions& options, ResourceHooks hooks, AcceptCallback on_accept);
  // Drops every half-accepted stream and rejects every queued request.
  void clear();
  // Requests waiting for setup budget.
  std::size_t queued() const noexcept { return queued_.size(); }

 private:
  struct Queued {
    verbs::CmId id;
    std::vector<std::byte> request;
    wire::Hello hello;
  };
  void admit(verbs::CmId id, std::span<const std::byte> request, const wire::Hello& hello);
  void drain_queue();
  void defer_drain();  // drain_queue() once the loop runs its deferred tasks

  EventLoop& loop_;
  RdmaOptions options_;
  ResourceHooks hooks_;
  AcceptCallback on_accept_;
  std::shared_ptr<rdmacm::CmChannel> channel_;
  std::map<RdmaStream*, std::unique_ptr<RdmaStream>> pending_;
  std::deque<Queued> queued_;
  bool drain_deferred_ = false;
  Alive<Acceptor> alive_{loop_, this};  // guards the deferred drain
};

// Rejects the request of `id` with a reject hello of `reason` and retires the id through
// `channel` (null: destroys it now; only outside any dispatch of its channel).
void reject_request(rdmacm::CmChannel* channel, verbs::CmId id, wire::RejectReason reason);

}  // namespace rmsg::rdma
