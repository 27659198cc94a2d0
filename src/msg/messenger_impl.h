// One loop's part of a messenger (a "shard"): the sessions (msg/session.h) whose peers
// hash to its loop and their connections (msg/connection.h), and what drives them. The
// control path (connect attempts, handshake, decisions, resets) is session_control.cc and
// session_handshake.cc; the data path (messages, acks, reading and writing) is
// session_data.cc and connection_io.cc; the public API messenger.cc.
//
// Lifetime: the Impl is shared (Messenger holds it) and every loop task, timer and stream
// callback holds a weak_ptr or a connection id, so nothing runs on a destroyed object. A
// weak_ptr, not an Alive token (loop/alive.h): the front on another thread posts to it, and
// its release, posted to this loop, may run in an iteration nested in one of its own
// callbacks; the lock keeps it for the rest of that frame (docs/HACKING.md, "Lifetime
// across callbacks").
// Connections are found by id; a closed one is removed at once (its Stream is closed, so
// no callback of it runs again).
//
// Threading: the loop thread.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "auth/keyring.h"
#include "msg/connection.h"
#include "msg/drainer.h"
#include "msg/relay_pump.h"
#include "msg/seams.h"
#include "msg/session.h"
#include "msg/transport_policy.h"
#include "msg/vocabulary.h"
#include "rmsg/messenger.h"
#include "session/admission.h"
#include "session/backoff.h"
#include "session/in_state.h"
#include "session/out_queue.h"
#include "session/reassembly.h"
#include "session/reconnect_decision.h"
#include "session/session_state.h"
#include "wire/frame_decoder.h"
#include "wire/frame_encoder.h"
#include "wire/frame_types.h"
#include "wire/session_frames.h"

namespace rmsg {

// What a shard hands its messenger front (messenger_front.h): a message with its service,
// and session events with the service of each message a reset hands back.
using ShardDispatch =
    std::function<void(NodeId from, std::uint16_t service, std::span<const std::byte> payload)>;
struct ShardEvent {
  SessionEvent event;
  std::vector<std::uint16_t> unknown_services;  // event.unknown[i]'s service
  std::vector<std::uint16_t> unsent_services;
};
using ShardEventCallback = std::function<void(ShardEvent event)>;

// One loop's part of a messenger (a "shard"): the sessions whose peers hash to its loop.
class Messenger::Impl : public std::enable_shared_from_this<Messenger::Impl> {
 public:
  // `admission` is the messenger's (shared by its shards); null: a budget of our own.
  Impl(EventLoop& loop, const MessengerOptions& options, std::unique_ptr<StreamFactory> streams,
       ShardDispatch dispatch, ShardEventCallback on_event,
       std::shared_ptr<msg::Admission> admission = nullptr);
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
  ~Impl();

  // messenger.cc: the public API.
  Result<std::string> listen(const SocketAddress& address, const ConnectionParams& params);
  Result<void> add_peer(NodeId peer, const ConnectionParams& params);
  void set_policy(NodeId peer, SessionPolicy policy);
  void mark_down(NodeId peer);
  // messenger_withdraw.cc (RPC's additions).
  // `draining_ok`: accepted during a drain (RPC's replies; MessengerPort). `payload` is
  // taken only when queued: a refused one stays the caller's (RPC holds it for later).
  Result<Messenger::Ticket> send_tracked(NodeId peer, std::vector<std::byte>&& payload,
                                         const Messenger::SendOptions& options,
                                         bool draining_ok = false);
  // A send from another thread: the caller reserved its share (Admission::try_reserve); on
  // the loop it is queued whatever the bounds say, or released if the shard shut down or
  // drains. Returns the message's ticket; none when nothing was queued.
  std::optional<Messenger::Ticket> send_reserved(NodeId peer, std::vector<std::byte> payload,
                                                 const Messenger::SendOptions& options);
  bool withdraw(NodeId peer, Messenger::Ticket ticket);
  // A send to `peer` refused on another thread started a refusal episode (once per
  // episode): its session, or, with none yet, the shard's list of such peers, ends it with
  // SessionEvent::writable once the budgets have room (sweep_refused_without_session).
  void refused_elsewhere(NodeId peer);
  std::optional<Messenger::SessionInfo> session_info(NodeId peer) const;
  // The peers this shard has a session with, in ascending order.
  std::vector<NodeId> session_peers() const;
  void shutdown();
  // messenger_drain.cc: the graceful shutdown.
  void drain(Clock::time_point deadline, std::function<void()> done);

  EventLoop& loop() const noexcept { return loop_; }
  NodeId node_id() const noexcept { return options_.node_id; }
  const CounterSet& counters() const noexcept { return counters_; }

  // session_failover.cc: both transports of a peer, and its policy between them.
  Result<void> add_peer(NodeId peer, const PeerAddresses& addresses);
  // session_handshake.cc: an accepted stream starts its handshake here.
  void on_accepted(Stream stream, Transport transport = Transport::tcp);
  // session_data.cc: ends this shard's refusal episodes once the shared budget has room.
  void sweep_writable();
  // The receiving side's bound (RPC's max_pending_requests; MessengerPort::set_read_paused):
  // stops or resumes reading the session's connections.
  void set_paused(NodeId peer, bool paused);

  // What the front (messenger_front.h) wires a shard with over several loops, set once
  // before any loop runs it: asks every other shard to sweep_writable() on its loop (the
  // total budget is shared, so an ack here may end an episode there); whether a peer's
  // session belongs on this shard (an accepted connection whose hello names another
  // shard's peer, an RDMA connect sent without the affinity that routes it, is relayed to
  // the owner: session_relay.cc); the owner's loop, and the hand-over of a relayed stream
  // to the owner shard (posted; it runs on_accepted there, with the transport loop 0
  // accepted it over).
  struct FrontHooks {
    std::function<void()> on_total_room;
    std::function<bool(NodeId)> owns;
    std::function<EventLoop&(NodeId)> owner_loop;
    std::function<void(NodeId, Stream, Transport)> to_owner;
  };
  void set_front_hooks(FrontHooks hooks);
  // The front's other uses: the counters it adds to (a send refused on another thread) and
  // hands the stream factory and service table; the factory a routed listener is made by,
  // and the shard that keeps such a listener.
  CounterSet& counters() noexcept { return counters_; }
  StreamFactory& streams() noexcept { return *streams_; }
  void keep_listener(Listener listener) { listeners_.push_back(std::move(listener)); }
  // What the port (msg/messenger_port.h) hands the layer above: when the message being
  // dispatched was read, the pool of acknowledged payloads, and a session's cookie (0: no
  // session with `peer`).
  const Clock::time_point& dispatch_time() const noexcept { return dispatch_rx_; }
  msg::PayloadPool& payload_pool() noexcept { return pool_; }
  Cookie session_cookie(NodeId peer);
  // Loads the key files the options name (session_auth.cc); the front calls it once per
  // shard before the loops run, and create() fails with its error.
  Result<void> init_auth();

  // The shard's insides, which only its own files (messenger_impl.cc, messenger_drain.cc,
  // messenger_withdraw.cc, session_*.cc, connection_io.cc) use.
 private:
  // After acks or resets: finishes the drain once queues are empty (messenger_drain.cc).
  void check_drained() { drainer_.check(); }
  // messenger_withdraw.cc.
  void sweep_refused_without_session();
  // The messenger-wide budget may have room without an ack (a session dropped or reset):
  // ends the episodes that waited for it, here and (posted) on the other loops.
  void note_total_room();

  // session_control.cc: sessions and connect attempts.
  Session& session_for(NodeId peer);
  // The cache hit inline (a message's path looks its session and connection up several
  // times), the map out of line.
  Session* find_session(NodeId peer) {
    return peer != 0 && peer == session_cache_peer_ ? session_cache_ : find_session_slow(peer);
  }
  Session* find_session_slow(NodeId peer);
  void reset_session(Session& s, std::error_code why, bool report);
  void want_connection(Session& s);  // connect now if allowed, or queue for a slot
  void schedule_attempt(Session& s, Duration delay);
  void start_attempt(Session& s);
  void attempt_failed(Session& s, std::error_code why);
  void connection_lost(Session& s, std::error_code why);
  void release_slot(Connection& c);
  // The one way a state changes: a step the table refuses (session/session_state.h; a bug
  // of ours) asserts in Debug; in Release it is logged, counted (msg.illegal_transitions)
  // and the state stays.
  void enter(Session& s, Session::State to);
  void enter(Connection& c, Connection::State to);
  void begin_attempt(Session& s, ConnId id);
  void end_attempt(Session& s);
  void illegal_transition(const char* what, std::uint64_t who, const char* from, const char* to);
  void emit(SessionEvent event, std::vector<std::uint16_t> unknown_services = {},
            std::vector<std::uint16_t> unsent_services = {});
  Cookie new_cookie();

  // session_expiry.cc: sessions' lifetime (session_expiry, max_sessions).
  void note_unconnected(Session& s);  // s has no connection from now on
  void note_connected(Session& s);    // s has one again
  void expiry_due();
  // Resets `s` as session_expired (SessionEvent::reset) and erases it.
  void expire(Session& s);
  // Erases `peer`'s session without an event (its connections dropped), and its budget.
  void erase_session(NodeId peer);
  // Below max_sessions, evicting the oldest evictable session if need be; false when full.
  bool room_for_session();

  // session_takeover.cc: a hello claiming its node restarted while the session's
  // connection is open. True when it is held until that connection answers a probe.
  bool hold_for_probe(Connection& c, Session& s, const msg::Hello& h, bool reconnect);
  void probe_answered(Connection& old, std::uint64_t stamp);
  void probe_ended(Connection& old);  // the probed connection goes: the hello is decided again
  void resume_held(ConnId id);

  // session_handshake.cc: banner, hello, decision, welcome.
  void on_connected(ConnId id, Result<Stream> stream);
  // An inbound connection whose hello names another shard's peer: its stream stays here
  // behind a relay, the owner shard handshakes again over the relayed bytes. False when
  // it cannot be (no front hooks, a handshake larger than the relay holds).
  bool relay(Connection& c, NodeId peer);
  // Adds what an inbound connection read before its hello to its transcript.
  void keep_transcript(ConnId id, std::span<const std::byte> in);
  void handshake_done(Connection& c);  // off the inbound handshakes' list
  void begin_handshake(Connection& c);
  void send_hello(Connection& c, Session& s);
  void on_handshake_frame(Connection& c, msg::Frame& f);
  void on_hello(Connection& c, const msg::Hello& h, bool reconnect);
  // session_auth.cc: our banner, and the authentication exchange after it.
  std::vector<std::byte> local_banner(Connection& c);
  void on_banner(Connection& c);
  void on_auth_proof(Connection& c, const msg::Frame& f);
  // Whether an unauthenticated hello from `node` must be refused (policy, keyring).
  bool must_authenticate(NodeId node) const;
  void accept_hello(Connection& c, Session& s, const msg::Hello& h, const msg::Decision& d);
  void open_session(Connection& c, Session& s, msg::Seq peer_delivered);

  // session_data.cc: frames of an open connection.
  void on_open_frame(Connection& c, msg::Frame& f);
  void pump(Session& s);            // writes what the window and the write buffer admit
  void pump_after_ack(Session& s);  // pump() when messages wait to start
  void send_ack(Connection& c, Session& s);
  void arm_ack_timer(Connection& c, Session& s, Clock::time_point now);
  void start_keepalive(Connection& c);
  void keepalive_tick(ConnId id);
  // After acks freed room: ends refusal episodes (SessionEvent::writable): this session's,
  // and, when the messenger-wide budget fell to half, those of this shard's other sessions
  // (sweep_writable) and, through on_total_room_, those of the other shards.
  void note_room(Session& s);
  void deliver(Connection& c, Session& s, msg::Seq seq, std::uint16_t service, msg::Frame& f);

  // session_failover.cc: transport policies, the fallback to TCP, probes back to RDMA.
  TransportPolicy transport_policy(const Session& s) const;
  // The params of `s`'s next connect (`c`); records its transport in both.
  const ConnectionParams& attempt_params(Session& s, Connection& c);
  // A lost connection or a failed connect taken care of by the policy (true: done).
  bool failover_on_loss(Session& s, std::error_code why);
  bool failover_attempt_failed(Session& s, std::error_code why);
  bool probe_gave_way(Session& s);
  // `c` just became `s`'s connection: counts and reports a switch, (re)arms the probe.
  void transport_opened(Session& s, Connection& c);
  void arm_probe(Session& s);
  void retire(ConnId id);
  void probe_due(NodeId peer);

  // connection_io.cc: streams, frames, errors.
  Connection& new_connection(Connection::Role role);
  Connection* find_connection(ConnId id) {
    return id != 0 && id == conn_cache_id_ ? conn_cache_ : find_connection_slow(id);
  }
  Connection* find_connection_slow(ConnId id);
  void watch(Connection& c);
  void on_readable(ConnId id);
  // Decodes and handles `in`; false when the connection went or its reading paused (the
  // rest is stashed).
  bool consume(ConnId id, std::span<const std::byte> in);
  bool read_paused(const Connection& c);
  void flush(Connection& c);
  // Closes `c` for `why` (counted as errors.<name> unless benign) and tells its session.
  void fail(ConnId id, std::error_code why);
  // Removes `c` without telling its session (the caller handles the session).
  void drop(ConnId id, bool graceful);
  void count_error(std::error_code why);

  EventLoop& loop_;
  MessengerOptions options_;
  std::optional<auth::KeyStore> keys_;  // auth != off: our key and keyring
  std::unique_ptr<StreamFactory> streams_;
  ShardDispatch dispatch_;
  ShardEventCallback on_event_;
  CounterSet counters_;
  // The per-message counters, looked up once: CounterSet::counter() takes a lock and
  // searches a map.
  struct HotCounters {
    Counter& queued;
    Counter& delivered;
    Counter& duplicates_dropped;
    Counter& acks_received;
    Counter& replayed;
    Counter& sent;
  };
  HotCounters hot_{counters_.counter("msg.queued"),
                   counters_.counter("msg.delivered"),
                   counters_.counter("msg.duplicates_dropped"),
                   counters_.counter("msg.acks_received"),
                   counters_.counter("msg.replayed"),
                   counters_.counter("msg.sent")};
  // When the message being dispatched was read (its connection's last_rx): RPC's stand-in
  // for now during the dispatch callback (MessengerPort::dispatch_time), which spares it a
  // clock read.
  Clock::time_point dispatch_rx_{};
  // Acknowledged payloads for the next messages (before sessions_: it outlives their queues).
  msg::PayloadPool pool_;
  std::shared_ptr<msg::Admission> admission_;
  msg::QueueLimits limits_;
  msg::AckPolicy ack_policy_;
  msg::BackoffPolicy backoff_policy_;
  msg::FrameLimits frame_limits_;
  std::unordered_map<NodeId, std::unique_ptr<Session>> sessions_;
  std::unordered_map<NodeId, ConnectionParams> peers_;
  std::unordered_map<NodeId, SessionPolicy> policies_;
  std::unordered_map<NodeId, PeerAddresses> routes_;  // add_peer(PeerAddresses)
  msg::BackoffPolicy probe_policy_;
  std::unordered_map<ConnId, std::unique_ptr<Connection>> conns_;
  // One-entry caches of find_connection() and find_session(): a connection's callbacks look
  // the same ones up several times per message, and a hash look-up costs a division.
  // Cleared where an entry leaves its map (drop, mark_down, shutdown).
  ConnId conn_cache_id_ = 0;
  Connection* conn_cache_ = nullptr;
  NodeId session_cache_peer_ = 0;
  Session* session_cache_ = nullptr;
  std::vector<Listener> listeners_;
  std::deque<NodeId> slot_waiters_;
  std::size_t handshakes_ = 0;
  ConnId next_conn_id_ = 1;
  std::uint64_t global_seq_ = 0;
  bool shutting_down_ = false;
  // Sessions with `paused` set: while 0, read_paused() needs no session look-up.
  std::size_t paused_sessions_ = 0;
  // shutdown(deadline, done) waiting for acks (messenger_drain.cc), and its done.
  msg::Drainer drainer_{loop_};
  std::function<void()> drain_done_;
  // The front's hooks (FrontHooks; empty with one loop).
  std::function<void()> on_total_room_;
  std::function<bool(NodeId)> owns_;
  std::function<EventLoop&(NodeId)> owner_loop_;
  std::function<void(NodeId, Stream, Transport)> to_owner_;
  // The relays this shard keeps the real streams of (session_relay.cc).
  std::unordered_map<std::uint64_t, std::unique_ptr<msg::RelayPump>> relays_;
  std::uint64_t next_relay_ = 1;
  // Peers of this shard in a refusal episode that have no session (refused_elsewhere):
  // one entry per episode, so at most one per peer.
  std::vector<NodeId> refused_without_session_;
  // Sessions without a connection, oldest first (session_expiry.cc), and the timer that
  // expires the first of them.
  std::list<NodeId> unconnected_;
  TimerId expiry_timer_ = 0;
  bool quiet_room_ = false;  // resets in a batch: note_total_room() once, after them
  // Accepted connections in their handshake, oldest first (max_inbound_handshakes).
  std::list<ConnId> inbound_handshakes_;
};

}  // namespace rmsg
