// A messenger connection: one Stream with its wire decoder, its write buffer of encoded
// frames, its timers and its state (session/session_state.h). Messenger::Impl drives it
// (connection_io.cc: reading, flushing, closing; the session_*.cc files: what its frames
// mean); the connection keeps its own invariants: the state moves only along its table,
// and the write buffer holds whole frames, the first `out_off_` bytes already written.
//
// Ownership: Messenger::Impl's map of connections, by id; callbacks hold the id, never a
// pointer. Threading: its shard's loop thread.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "auth/exchange.h"
#include "msg/vocabulary.h"
#include "rmsg/event_loop.h"
#include "rmsg/messenger.h"
#include "rmsg/stream.h"
#include "session/reassembly.h"
#include "session/session_state.h"
#include "wire/frame_decoder.h"
#include "wire/frame_encoder.h"
#include "wire/frame_types.h"
#include "wire/session_frames.h"

namespace rmsg {

using ConnId = std::uint64_t;  // 0: none

// An allocator whose resize() leaves new bytes uninitialized (default-initialized, not
// value-initialized): the write buffer grows by a frame's size and the encoder writes every
// byte of it at once, so zero-filling it first (a memset per frame) is wasted work.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() noexcept = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using WriteBuffer = std::vector<std::byte, UninitAllocator<std::byte>>;

class Connection {
 public:
  enum class Role : std::uint8_t { outbound, inbound };
  using State = msg::ConnState;

  // `limits` (the shard's) outlives the connection.
  Connection(ConnId conn_id, Role conn_role, const msg::FrameLimits& limits) noexcept
      : id(conn_id), role(conn_role), limits_(&limits) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&&) = delete;
  Connection& operator=(Connection&&) = delete;
  ~Connection() = default;

  State state() const noexcept { return state_.get(); }
  // The checked step (Messenger::Impl::enter reports a refused one).
  [[nodiscard]] Result<void> to(State next) noexcept { return state_.to(next); }

  // The write buffer (connection_io.cc). Each queue_* appends one whole frame, or nothing
  // and false when it exceeds the frame limits; the stream takes them through unwritten()
  // and wrote().
  bool queue_frame(msg::FrameType type, std::span<const msg::Segment> segments);
  // The per-message path: queue_frame()'s work for a message frame in one pass
  // (wire/message_frame.h), the same bytes.
  bool queue_message(const msg::MessageHeader& h, std::span<const std::byte> payload);
  bool queue_control(msg::FrameType type, std::span<const std::byte> payload);
  void queue_bytes(std::span<const std::byte> bytes) {  // the banner
    out_.insert(out_.end(), bytes.begin(), bytes.end());
  }
  std::size_t pending_bytes() const noexcept { return out_.size() - out_off_; }
  std::span<const std::byte> unwritten() const noexcept {
    return std::span<const std::byte>(out_).subspan(out_off_);
  }
  // The stream accepted the next `n` bytes of unwritten().
  void wrote(std::size_t n) noexcept {
    out_off_ += n;
    sent_since_tick = true;
    if (out_off_ == out_.size()) {
      out_.clear();
      out_off_ = 0;
    }
  }
  // Cancels the handshake deadline, the ack timer and the keepalive (not the takeover
  // probe's: session_takeover.cc ends that).
  void cancel_timers(EventLoop& loop) noexcept {
    for (TimerId* t : {&deadline, &ack_timer, &keepalive}) {
      if (*t != 0) loop.cancel_timer(*t);
      *t = 0;
    }
  }

  const ConnId id;
  const Role role;
  NodeId peer = 0;  // outbound: the target; inbound: 0 until its hello
  Stream stream;
  std::optional<msg::WireDecoder> decoder;
  std::optional<msg::Reassembler> reasm;  // open: incoming fragments
  std::uint64_t attempt_cs = 0;           // outbound: the connect_seq our hello asked for
  TimerId deadline = 0;                   // handshake timeout
  TimerId ack_timer = 0;        // armed while an ack may come due; never cancelled (it re-checks)
  TimerId keepalive = 0;        // open: the liveness tick
  Clock::time_point last_rx{};  // when bytes last arrived (one clock read per read call)
  // When the liveness tick last saw something written: a write only sets the flag, so the
  // data path reads no clock for it; a keepalive is due up to one tick late.
  Clock::time_point last_tx{};
  bool sent_since_tick = false;
  bool holds_slot = false;               // counts against max_handshakes
  bool pump_deferred = false;            // a pump() continuation is queued on the loop
  Transport transport = Transport::tcp;  // outbound: of its params; inbound: its listener's
  std::vector<std::byte> stash;          // read while its session's reading was paused
  // Inbound on a shard of several, until its hello is handled: every byte read, replayed
  // to the owner shard if the hello names another shard's peer (session_relay.cc).
  std::vector<std::byte> transcript;
  // session_takeover.cc. Open: a hello claiming the peer restarted waits (connection
  // `probe_for`) for this connection to answer the keepalive stamped `probe_stamp`.
  ConnId probe_for = 0;
  std::uint64_t probe_stamp = 0;
  TimerId probe_timer = 0;
  // Inbound, in its handshake: its place in Impl::inbound_handshakes_ (oldest first).
  bool counted_inbound = false;
  std::list<ConnId>::iterator inbound_pos{};
  // Handshake: the hello that waits for that probe.
  std::optional<msg::Hello> held;
  bool held_reconnect = false;
  // Handshake with authentication on (session_auth.cc): the exchange, from our banner to
  // the peer's verified proof; then the node it proved to be (0: not authenticated).
  std::unique_ptr<auth::Exchange> auth;
  NodeId authenticated = 0;

 private:
  // Makes room at the front once half the buffer is written (amortized: no erase per frame).
  void compact() {
    if (out_off_ > 0 && out_off_ * 2 >= out_.size()) {
      out_.erase(out_.begin(), out_.begin() + static_cast<std::ptrdiff_t>(out_off_));
      out_off_ = 0;
    }
  }

  const msg::FrameLimits* limits_;
  msg::Checked<State> state_{State::connecting};
  WriteBuffer out_;  // encoded frames not yet accepted by the stream
  std::size_t out_off_ = 0;
};

}  // namespace rmsg
