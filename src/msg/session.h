// A messenger session: everything the messenger keeps about one peer node across its
// connections — the out queue and in state (session/), the cookies and sequence numbers of
// the handshake, backoff, the transport policy's state, and its state
// (session/session_state.h: connection `conn()` when open or probing, attempt `outbound()`
// when connecting or probing). The state and the attempt change only through to(),
// begin_attempt() and end_attempt() (Messenger::Impl::enter() and its kin report a step
// the table refuses); a reset goes through restart(), which alone changes the out queue
// and our cookie.
//
// Ownership: Messenger::Impl's map of sessions, by peer. Threading: its shard's loop thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <list>
#include <memory>
#include <utility>

#include "msg/connection.h"
#include "msg/transport_policy.h"
#include "msg/vocabulary.h"
#include "rmsg/loop_time.h"
#include "rmsg/messenger.h"
#include "session/backoff.h"
#include "session/in_state.h"
#include "session/out_queue.h"
#include "session/session_state.h"

namespace rmsg {

using msg::Cookie;

class Session {
 public:
  using State = msg::SessionState;

  // `queue`: the session's out queue; `cookie`: ours for this session (both new again at
  // each restart()).
  Session(NodeId peer_node, const msg::AckPolicy& ack, const msg::BackoffPolicy& backoff_policy,
          std::unique_ptr<msg::OutQueue> queue, Cookie cookie)
      : peer(peer_node),
        in(ack),
        backoff(backoff_policy),
        my_cookie_(cookie),
        out_(std::move(queue)) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  Session(Session&&) = delete;
  Session& operator=(Session&&) = delete;
  ~Session() = default;

  State state() const noexcept { return state_.get(); }
  // Has an established connection (`conn`): open, or open with a probe under way.
  bool connected() const noexcept { return state_.is(State::open) || state_.is(State::probing); }
  // Our connect attempt under way (a probe when probing); 0: none.
  ConnId outbound() const noexcept { return outbound_; }
  // The established connection (open or probing); 0: none (connecting, idle, or between
  // the old connection's end and the new one's welcome). use_connection() when the
  // session opens over one, lose_connection() when it goes or gives way.
  ConnId conn() const noexcept { return conn_; }
  void use_connection(ConnId id) noexcept { conn_ = id; }
  void lose_connection() noexcept { conn_ = 0; }
  // Ours for this session: a ticket (Messenger::Ticket::session) and the peer's
  // server_cookie name it. Changes only with restart().
  Cookie my_cookie() const noexcept { return my_cookie_; }
  // What we send this session, in order, until acknowledged (replayed on a reconnect).
  msg::OutQueue& out() noexcept { return *out_; }
  const msg::OutQueue& out() const noexcept { return *out_; }

  // The checked steps (the caller reports a refused one).
  [[nodiscard]] Result<void> to(State next) noexcept { return state_.to(next); }
  // `id` is the attempt now: connecting, or probing when open.
  [[nodiscard]] Result<void> begin_attempt(ConnId id) noexcept {
    outbound_ = id;
    return state_.to(state_.is(State::open) ? State::probing : State::connecting);
  }
  // The attempt is over (opened, failed, dropped or gave way): a probe leaves it open.
  [[nodiscard]] Result<void> end_attempt() noexcept {
    outbound_ = 0;
    return state_.is(State::probing) ? state_.to(State::open) : Result<void>{};
  }

  // A new session with the same peer (reset_session): a fresh queue and in state, a new
  // cookie of ours, none of the peer's numbers. Connections, timers, the transport
  // policy's state and the retired cookies stay.
  void restart(std::unique_ptr<msg::OutQueue> queue, msg::InState in_state, Cookie cookie,
               SessionPolicy session_policy) {
    out_ = std::move(queue);
    in = std::move(in_state);
    my_cookie_ = cookie;
    peer_cookie = 0;
    peer_global_seq = 0;
    connect_seq = 0;
    ever_open = false;
    policy = session_policy;
  }

  // The peer's cookies that a restart we accepted replaced, the newest four: a
  // client_ident read late from an attempt abandoned before it carries one
  // (msg::SessionView::client_cookie_retired). Kept across restart().
  void retire_peer_cookie(Cookie c) noexcept {
    retired_peer_cookies_[retired_next_] = c;
    retired_next_ = static_cast<std::uint8_t>((retired_next_ + 1) % retired_peer_cookies_.size());
  }
  bool peer_cookie_retired(Cookie c) const noexcept {
    return c != 0 && std::find(retired_peer_cookies_.begin(), retired_peer_cookies_.end(), c) !=
                         retired_peer_cookies_.end();
  }

  // Without a connection since unconnected_since() (session_expiry.cc), with its place in
  // the shard's list of such sessions, oldest first. note_unconnected: false when it was
  // already on the list.
  bool note_unconnected(Clock::time_point now, std::list<NodeId>& list) {
    if (unconnected_) return false;
    unconnected_ = true;
    unconnected_since_ = now;
    unconnected_pos_ = list.insert(list.end(), peer);
    return true;
  }
  void note_connected(std::list<NodeId>& list) noexcept {
    if (!unconnected_) return;
    unconnected_ = false;
    list.erase(unconnected_pos_);
  }
  Clock::time_point unconnected_since() const noexcept { return unconnected_since_; }

  const NodeId peer;
  SessionPolicy policy = SessionPolicy::lossless;
  Cookie peer_cookie = 0;
  std::uint64_t peer_global_seq = 0;
  std::uint64_t connect_seq = 0;  // of the last connection established (or bumped by wait)
  msg::InState in;
  msg::Backoff backoff;
  TimerId timer = 0;
  bool ever_open = false;
  msg::FailoverState fo;  // transport policy state (session_failover.cc)
  bool paused = false;    // set_paused(): its connections are not read

 private:
  msg::Checked<State> state_{State::idle};
  Cookie my_cookie_;
  std::unique_ptr<msg::OutQueue> out_;
  ConnId conn_ = 0;
  ConnId outbound_ = 0;
  std::array<Cookie, 4> retired_peer_cookies_{};
  std::uint8_t retired_next_ = 0;
  bool unconnected_ = false;
  Clock::time_point unconnected_since_{};
  std::list<NodeId>::iterator unconnected_pos_{};
};

}  // namespace rmsg
