// MessengerPort: everything a layer above the messenger (RPC, src/rpc) may do with it, one
// port per shard (loop) of a messenger. The layer above holds ports, never the messenger's
// Front, shards or their fields: what it needs of them is named here.
//
// A port is a few pointers (copied freely). The messenger must outlive every use of it;
// close() ends its shard part (the loop-thread calls) at once, the any-thread part stays
// usable as long as the messenger lives, so another thread racing a close() reads nothing
// that close() writes.
//
// Cost: the loop-thread calls are direct, non-virtual calls into the shard (send_here,
// withdraw: one forwarding jump each), dispatch_time() and buffers() inline loads; nothing
// on the message path is virtual or allocates.
//
// Threading: as marked per call. "Shard's loop" calls assert that loop's thread in Debug
// builds (RMSG_ASSERT_LOOP_THREAD).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "msg/seams.h"
#include "rmsg/export.h"
#include "rmsg/messenger.h"
#include "session/payload_pool.h"

namespace rmsg::msg {

// Hidden, as the Messenger parts it points at (this header is internal).
class RMSG_HIDDEN MessengerPort {
 public:
  // One factory per loop (made on the creating thread, once per loop, in order).
  using MakeStreams = std::function<Result<std::unique_ptr<StreamFactory>>(EventLoop&)>;
  // send_tracked()'s ticket, on the peer's loop once the message is queued there.
  using Queued = std::function<void(Messenger::Ticket ticket)>;

  // A messenger over `loops` whose messages and events go to `dispatch` and `on_event`
  // (service 0), with streams from `make_streams` (MessengerAccess::create).
  static Result<std::unique_ptr<Messenger>> create(std::span<EventLoop* const> loops,
                                                   const MessengerOptions& options,
                                                   const MakeStreams& make_streams,
                                                   Messenger::DispatchCallback dispatch,
                                                   Messenger::EventCallback on_event);

  MessengerPort() = default;  // bound to nothing (closed)
  // Shard `index` (< m.loop_count()) of `m`. Any thread.
  MessengerPort(Messenger& m, std::size_t index);

  // ---- Any thread, while the messenger lives ----
  Messenger& messenger() const noexcept { return *messenger_; }
  const MessengerOptions& options() const noexcept { return *options_; }
  // The index of the shard (loop) that owns `peer`'s session (Messenger::loop_of).
  std::size_t owner(NodeId peer) const noexcept;
  // This shard's loop.
  EventLoop& loop() const noexcept { return *loop_; }
  // Messenger::send(peer, payload, options): queued at once on the peer's loop, else its
  // bounds answer now and the message is posted there.
  Result<void> send(NodeId peer, std::vector<std::byte> payload,
                    const Messenger::SendOptions& options) const;
  // A tracked send from any thread: the bounds answer now; `queued` gets the ticket on the
  // peer's loop once the message is queued (inside this call on that loop; never when the
  // shard shut down first).
  Result<void> send_tracked(NodeId peer, std::vector<std::byte> payload,
                            const Messenger::SendOptions& options, Queued queued) const;

  // ---- The shard's loop, until close() ----
  bool closed() const noexcept { return shard_ == nullptr; }
  void close() noexcept;
  // Messenger::send_tracked for a peer this shard owns; `draining_ok`: accepted during the
  // messenger's drain (replies). `payload` is taken only when queued: a refused one stays
  // the caller's.
  Result<Messenger::Ticket> send_here(NodeId peer, std::vector<std::byte>&& payload,
                                      const Messenger::SendOptions& options,
                                      bool draining_ok = false) const;
  // Messenger::withdraw for a peer this shard owns.
  bool withdraw(NodeId peer, Messenger::Ticket ticket) const;
  // Stops (or resumes) reading `peer`'s connections: the receiving side's bound. The
  // peer's writes back up into its queue; nothing is dropped.
  void set_read_paused(NodeId peer, bool paused) const;
  // This end's cookie of the session with `peer` (0: none): its incarnation.
  std::uint64_t session_cookie(NodeId peer) const;
  // Every session of this shard with its Messenger::session_info (the admin endpoint).
  std::vector<std::pair<NodeId, Messenger::SessionInfo>> sessions() const;
  // During a dispatch callback: when the message being dispatched was read (its
  // connection's last read; a stand-in for now that spares a clock read).
  Clock::time_point dispatch_time() const noexcept { return *dispatch_rx_; }
  // The shard's spare message buffers (acknowledged payloads) for what is encoded here.
  session::PayloadPool& buffers() const noexcept { return *pool_; }

 private:
  // Any thread (constant).
  Messenger* messenger_ = nullptr;
  Messenger::Front* front_ = nullptr;
  const MessengerOptions* options_ = nullptr;
  EventLoop* loop_ = nullptr;
  // The shard's loop (null once closed).
  Messenger::Impl* shard_ = nullptr;
  const Clock::time_point* dispatch_rx_ = nullptr;
  session::PayloadPool* pool_ = nullptr;
};

}  // namespace rmsg::msg
