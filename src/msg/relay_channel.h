// RelayChannel: the two bounded byte pipes between an inbound connection that must stay on
// loop 0 (an RDMA stream cannot move to another loop) and the shard that owns its peer
// (docs/messenger.md, Threading: RDMA connectors without affinity). The near side
// (RelayPump, loop 0) holds the real stream; the far side (RelayStream, the owner's loop)
// is the Stream the owner's handshake runs on. Each pipe holds at most `capacity` bytes: a
// side that stops reading stops the other from writing (would_block), never grows memory.
// After its bytes a pipe ends with EOF (the writer's shutdown_write or the peer's FIN) or
// an error (the writer aborted, or the real stream failed).
//
// Threading: push/pull/finish/state from either side's thread (one mutex); wake(side)
// runs that side's handler on its loop (posted, coalesced); set_handler(side) only on that
// side's loop thread, and a handler runs only there, so clearing it in the side's
// destructor is enough for a wake-up queued before to do nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <system_error>

#include "rmsg/event_loop.h"

namespace rmsg::msg {

// What each pipe of a messenger's relay holds: four read chunks, enough that the relay is
// not what limits a stream's throughput on this compatibility path.
inline constexpr std::size_t kRelayCapacity = std::size_t{256} * 1024;

class RelayChannel : public std::enable_shared_from_this<RelayChannel> {
 public:
  enum Side : std::size_t { kNear = 0, kFar = 1 };
  struct Pulled {
    std::size_t n = 0;
    bool eof = false;       // n == 0: the pipe ended in order
    std::error_code error;  // n == 0: the pipe ended with this error
  };
  RelayChannel(EventLoop& near_loop, EventLoop& far_loop, std::size_t capacity);

  // Appends what fits of `data` to the pipe toward the other side; 0 when full or ended.
  std::size_t push(Side from, std::span<const std::byte> data);
  // Takes up to out.size() bytes from the pipe toward `to`.
  Pulled pull(Side to, std::span<std::byte> out);
  // Ends the pipe from `from`: in order (error empty, after its bytes) or with `error`
  // (abortive: the bytes not yet pulled are dropped). The first end stays. Wakes both.
  void finish(Side from, std::error_code error);
  // The error the pipe toward `from`'s peer ended with ({} while open or ended in order):
  // a writer on `from` fails with it.
  std::error_code write_error(Side from) const;
  bool ended(Side to) const;     // the pipe toward `to` ended (its bytes may remain)
  bool readable(Side to) const;  // bytes, EOF or an error to pull
  std::size_t room(Side from) const;

  // The far side let go of its Stream (it reads and writes no more); wakes the near side.
  void far_closed() {
    far_closed_.store(true, std::memory_order_release);
    wake(kNear);
  }
  bool is_far_closed() const { return far_closed_.load(std::memory_order_acquire); }

  void set_handler(Side side, std::function<void()> handler) {
    handler_[side] = std::move(handler);
  }
  void wake(Side side);

 private:
  struct Pipe {
    std::deque<std::byte> bytes;
    bool ended = false;
    std::error_code error;
  };
  Pipe& toward(Side to) { return pipes_[to]; }
  const Pipe& toward(Side to) const { return pipes_[to]; }
  static Side other(Side s) { return s == kNear ? kFar : kNear; }

  EventLoop* loop_[2];
  std::size_t capacity_;
  mutable std::mutex mu_;
  Pipe pipes_[2];  // pipes_[s]: the bytes toward side s
  std::atomic<bool> far_closed_{false};
  std::atomic<bool> wake_pending_[2] = {false, false};
  std::function<void()> handler_[2];
};

}  // namespace rmsg::msg
