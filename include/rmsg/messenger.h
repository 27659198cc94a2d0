// Messenger: ordered, lossless messages between nodes over rmsg Streams (TCP or RDMA),
// surviving every reconnect. Design, decision order, policies and bounds:
// docs/messenger.md; every byte on the wire: docs/protocol.md (Messenger).
//
// Each messenger has a configured 64-bit node id (rmsg/node_id.h makes and keeps one).
// It keeps one session per peer node: the
// messages to that peer, numbered from 1, kept until the peer acknowledged them, and
// replayed in order on the next connection after a fault; the receiver drops what it
// already has, so each message reaches the dispatch callback exactly once and in order
// (within its lane: a priority message may overtake bulk ones, see Flow control below).
// A message is acknowledged once the dispatch callback returned ("handed to the
// application"). Connections are made by the session itself (add_peer() tells it where
// the peer listens), with jittered exponential backoff, at most max_handshakes at a time;
// a peer that can only be reached by its own connects (no add_peer) is waited for.
//
// Policies (per peer): lossless keeps and replays unacknowledged messages across
// connections; lossy does not: a connection lost is a session reset. Transport policies
// (TransportPolicy, per peer, add_peer(PeerAddresses)): a session may move between RDMA
// and TCP connections, losing and doubling nothing (docs/messenger.md, Failover).
//
// A session reset (SessionEvent::reset) ends a session: the peer restarted (it presents a
// new session cookie), our side was forgotten by the peer (it restarted), a lossy
// connection was lost, or the session had no connection for session_expiry
// (MessengerErrc::session_expired: the peer is taken to be gone for good and the session is
// forgotten; docs/messenger.md, Limits). A hello that claims its node restarted while
// that node's connection answers keepalives is refused (MessengerErrc::duplicate_node) and
// does not reset the session. Without authentication (MessengerOptions::auth) anyone who can
// reach a listener can claim a node id whose connection is down (docs/messenger.md, Threat
// model); with it, a node id is whoever holds its key (docs/security.md). The
// event hands back the messages whose delivery is unknown (written at least once, never
// acknowledged) apart from those never sent; numbering starts again at 1 in the new
// session.
//
// Services: every user of a messenger that talks to one peer shares one session with it.
// Each message names its service (a u16 on the wire, 0 the default: the dispatch callback
// given to create()); attach() adds the dispatch and event callbacks of another (an
// RpcEndpoint over this messenger, a raw-message user). A message goes to its service's
// dispatch only; session events go to every user, and a reset hands each user back its own
// messages. A message for a service nobody attached is dropped (counted
// msg.unknown_service) after it was delivered (acknowledged).
//
// Threading (docs/messenger.md, Threading): the messenger runs on the N EventLoops given to
// create() (LoopThreads, rmsg/loop_threads.h, makes and runs them if asked; the messenger
// starts no thread). Each session lives on one loop, the owner of its peer: loop index
// splitmix64(peer) mod N. send() may be called from any thread: on the owner's thread it
// queues at once; from elsewhere it reserves the message's share of the queue bounds
// (atomic, so a full queue is refused synchronously) and posts the message to the owner,
// where it is queued in the order posted. add_peer(), set_policy() and mark_down() may be
// called from any thread likewise (applied on the owner's loop, in order with sends from
// the same thread). Every callback runs on the loop of the session it concerns; callbacks
// may call any method but must not destroy the messenger. Methods marked "loop-thread-only"
// run on the owner's thread of their peer (loop_of(peer)); with one loop that is simply
// the loop's thread. Before the loops first run, one thread at a time may call anything.
// The loops must outlive the messenger and keep running until it is destroyed (or be
// driven by the destroying thread): the destructor runs each loop's shutdown on that loop.
//
// Errors (send and events): Errc::resource_exhausted (a queue bound; nothing queued;
// SessionEvent::writable follows), Errc::invalid_argument (node id 0 or our own, a payload
// over max_message_size), Errc::closed (after shutdown() began),
// MessengerErrc (below) and the wire's rmsg::wire WireErrc ("rmsg.msg.wire") for the reason
// a connection closed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "rmsg/address.h"
#include "rmsg/connection_manager.h"
#include "rmsg/counters.h"
#include "rmsg/event_loop.h"
#include "rmsg/export.h"
#include "rmsg/messenger_errors.h"
#include "rmsg/node_id.h"
#include "rmsg/result.h"

namespace rmsg {

using ServiceId = std::uint16_t;  // a messenger's user (0: the default one)

enum class SessionPolicy : std::uint8_t { lossless = 0, lossy = 1 };

// Node authentication (docs/security.md). off: none. offer: authenticate with every peer
// that offers it, and refuse a node the keyring lists when it does not (a keyed node is
// never downgraded). require: refuse every peer that does not authenticate.
enum class AuthPolicy : std::uint8_t { off = 0, offer = 1, require = 2 };

// Which transports a session's own connects use (docs/messenger.md, Failover). Accepted
// connections are taken over whichever transport they came on, whatever the policy.
//   rdma_only, tcp_only: that transport only (a failure waits the backoff, as always).
//   rdma_preferred: RDMA first; when an RDMA connection fails or cannot be made, the
//     session reconnects over TCP at once, then probes RDMA with probe_backoff while on TCP
//     and moves back make-before-break when a probe succeeds.
enum class TransportPolicy : std::uint8_t { rdma_only = 0, tcp_only = 1, rdma_preferred = 2 };

// Where a peer listens on each transport (it calls Messenger::listen once per transport).
// `rdma.transport` and `tcp.transport` are overridden to their names' transports.
struct RMSG_EXPORT PeerAddresses {
  ConnectionParams rdma;
  ConnectionParams tcp;
  TransportPolicy policy = TransportPolicy::rdma_preferred;
};

struct RMSG_EXPORT SessionEvent {
  enum class Kind : std::uint8_t {
    connected,     // a connection is established (first, after a fault, or a probe's)
    disconnected,  // the connection was lost; a lossless session carries on (error: why)
    failed,        // a connect attempt failed; the next follows after backoff (error: why)
    reset,         // the session ended (error: why) and its messages are handed back
    // The session's connection now runs over another transport than its previous one
    // (`transport`: the new one; error: what ended the previous connection, or
    // MessengerErrc::replaced when a probe moved it back; `time`: the loop's clock).
    switched,
    writable,  // a send() refused with resource_exhausted may be retried (Flow control)
  };
  Kind kind = Kind::connected;
  NodeId peer = 0;
  std::error_code error;
  std::vector<std::vector<std::byte>> unknown;  // reset: delivery unknown, oldest first
  std::vector<std::vector<std::byte>> unsent;   // reset: never sent, oldest first
  Transport transport = Transport::tcp;         // switched: the transport now in use
  Clock::time_point time{};                     // switched: when
};

struct RMSG_EXPORT MessengerOptions {
  NodeId node_id = 0;  // required, not 0; unique among the nodes that talk to each other
  SessionPolicy default_policy = SessionPolicy::lossless;
  // Bounds. Every queued message (sent and unacknowledged, or not yet sent) counts
  // against its session's and the messenger's totals; send() refuses beyond them.
  std::size_t max_message_size = std::size_t{4} << 20;
  std::size_t session_max_messages = 4096;
  std::size_t session_max_bytes = std::size_t{64} << 20;
  std::size_t total_max_messages = 65536;
  std::size_t total_max_bytes = std::size_t{256} << 20;
  // Written on a connection and not yet acknowledged: the rest waits. window_messages is
  // at most 65536 (what a receiver delivers ahead of its next in-order message).
  std::size_t window_messages = 1024;
  std::size_t window_bytes = std::size_t{16} << 20;
  // A standalone ack after this many messages delivered, or this long after the first of
  // them when no frame carried the ack meanwhile.
  std::uint32_t ack_every = 32;
  Duration ack_delay = std::chrono::milliseconds(5);
  // Reconnect backoff: the n-th failure in a row waits a random time in [b/2, b],
  // b = backoff_initial * 2^(n-1) capped at backoff_max (EventLoop::random()).
  Duration backoff_initial = std::chrono::milliseconds(10);
  Duration backoff_max = std::chrono::seconds(2);
  Duration handshake_timeout = std::chrono::seconds(5);
  // Liveness of an open connection: a keepalive frame after keepalive_interval without
  // sending anything; the connection closes (idle_timeout) after idle_timeout without
  // receiving anything (the peer's keepalives count). Zero turns either off;
  // idle_timeout must exceed the peer's keepalive_interval. Both are checked on one tick
  // (the shorter of keepalive_interval and idle_timeout / 4), and writes are noticed on it,
  // so a keepalive after other traffic may come up to one tick late.
  Duration keepalive_interval = std::chrono::seconds(1);
  Duration idle_timeout = std::chrono::seconds(10);
  // Our connect attempts in flight at once (connect + handshake); more wait their turn.
  std::size_t max_handshakes = 16;
  // Sessions' lifetime (docs/messenger.md, Limits). A session without a connection for
  // session_expiry (whether or not it is trying to connect) is reset with
  // MessengerErrc::session_expired (SessionEvent::reset hands its messages back; RPC fails
  // its calls with session_reset) and forgotten, its budget with it; a peer that comes back
  // later starts a new session. Zero: never. At most max_sessions sessions exist at once
  // (messenger-wide; 0: no bound): a hello that would make one more first evicts the
  // session without a connection and without an address (add_peer) that lost its
  // connection longest ago (reset as expired); with none such, the hello is refused (its
  // connection closed, counted msg.sessions_refused). A send() to a new peer evicts
  // likewise but is never refused for it.
  Duration session_expiry = std::chrono::seconds(60);
  std::size_t max_sessions = 16384;
  // Accepted connections in their handshake (banner and hello not yet accepted) at once,
  // per loop (0: no bound); one more closes the one waiting longest (counted
  // msg.handshake.evicted), as loop 0's routing does with max_accepts_waiting.
  std::size_t max_inbound_handshakes = 256;
  // Over several loops: accepted TCP connections waiting on loop 0 for their hello, which
  // names the loop they go to (loop 0's ConnectionManager routes them, docs/messenger.md)
  // at once; one more closes the one waiting longest (counted as msg.route.evicted).
  // Accepted connections in their handshake otherwise count against the
  // ConnectionManager's max_connections.
  std::size_t max_accepts_waiting = 256;
  // ConnectionManagerOptions::max_connections of each loop's manager (0: no bound): the
  // connections it made or accepted and has not released. Over several loops a TCP
  // connection counts against the manager that accepted it (loop 0's, the listener's)
  // until it is released on whichever loop owns its peer, so it bounds every accepted TCP
  // connection of the messenger; an RDMA one counts against the owner's manager (routed
  // accepts are admitted there). Over the bound an accepted TCP connection is reset at
  // once, an RDMA connect request rejected; the peer's session retries after backoff.
  std::size_t max_connections = 0;
  // Bytes written to a connection and not yet accepted by its stream, past which no more
  // messages are taken from the queue (the stream's backpressure reaches the queue).
  std::size_t write_buffer = std::size_t{256} << 10;
  // rdma_preferred sessions on TCP probe RDMA after a random time in [b/2, b], b doubling
  // from probe_backoff_initial per failed probe up to probe_backoff_max; a probe is one
  // connect + handshake and leaves the TCP connection alone when it fails.
  Duration probe_backoff_initial = std::chrono::milliseconds(500);
  Duration probe_backoff_max = std::chrono::seconds(30);
  // Flow control (docs/messenger.md): messages larger than this go out in chunks of it,
  // so that priority-lane messages, acks and keepalives pass between them. 0: never split.
  std::size_t fragment_size = std::size_t{64} << 10;
  // Node authentication (docs/security.md; AuthPolicy above): this node's Ed25519 private
  // key (PEM; refused when group or others may read or write it) and the keyring ("node-id
  // public-key" lines), both re-read when they change (key rotation without restarts).
  // create() fails with the rmsg.auth error of a file that does not load. Unused when off.
  AuthPolicy auth = AuthPolicy::off;
  std::string auth_key_file;
  std::string auth_keyring_file;
};

class RMSG_EXPORT Messenger {
 public:
  using DispatchCallback = std::function<void(NodeId from, std::span<const std::byte> payload)>;
  using EventCallback = std::function<void(SessionEvent event)>;

  // Errors: Errc::invalid_argument (node_id 0, a bound of 0, no dispatch callback).
  static Result<std::unique_ptr<Messenger>> create(EventLoop& loop, const MessengerOptions& options,
                                                   DispatchCallback dispatch,
                                                   EventCallback on_event = {});
  // A messenger over several loops (see Threading at the top); one loop is the case above.
  // Made before the loops run (each shard is built for its loop on this thread). The bounds
  // of MessengerOptions hold for the messenger as a whole. Errors: as above, and
  // Errc::invalid_argument for no loops or a null one.
  static Result<std::unique_ptr<Messenger>> create(std::span<EventLoop* const> loops,
                                                   const MessengerOptions& options,
                                                   DispatchCallback dispatch,
                                                   EventCallback on_event = {});
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;
  Messenger(Messenger&&) = delete;
  Messenger& operator=(Messenger&&) = delete;
  // Closes every connection (a close frame, then a graceful stream close) and drops the
  // sessions without events; queued messages are lost.
  ~Messenger();

  // Accepts peers on `address` (port 0: any) over `params`' transport. Returns the bound
  // address ("ip:port"). With several loops the listener is on loop 0: a TCP connection is
  // handed to the loop that owns its peer once the peer's hello named it (it waits at
  // most handshake_timeout for it, unread: counted msg.route.*); an RDMA connect request
  // is routed by its affinity (the connector's node id) to the owner's ConnectionManager,
  // which accepts it on its loop (docs/messenger.md, Threading): over RDMA with several
  // loops, call it before the loops run.
  // Loop-thread-only (loop 0), or before the loops run. Errors: those of
  // ConnectionManager::listen and ConnectionManager::accept_routed.
  Result<std::string> listen(const SocketAddress& address, const ConnectionParams& params);
  // Where and how to reach `peer` (params.peer: its listening address). The session
  // connects when it has messages, and keeps reconnecting after faults.
  Result<void> add_peer(NodeId peer, const ConnectionParams& params);
  // Where `peer` listens on RDMA and on TCP, and which of them this session's connects
  // use (TransportPolicy). Replaces an earlier add_peer of either kind.
  Result<void> add_peer(NodeId peer, const PeerAddresses& addresses);
  // Without a transport (the way to start): listen() accepts on TCP, and on RDMA at the
  // same port where a local device has an active port (rdma_device_available(): a look at
  // the devices, no connect); it returns the TCP address. add_peer() reaches `peer` at
  // `address` over TCP only on a host without such a device, else rdma_preferred (RDMA
  // first, TCP at once when RDMA cannot be set up). session_info(peer)->transport says
  // which one the session's connection uses. Same threads and errors as above.
  Result<std::string> listen(const SocketAddress& address);
  Result<void> add_peer(NodeId peer, const SocketAddress& address);
  void set_policy(NodeId peer, SessionPolicy policy);

  // Queues a message for `peer`'s `service` (copied). Returns at once; the message is
  // delivered once, in the order the session queued it (messages sent by one thread keep
  // their order), unless a session reset hands it back. Any thread. Errors: see the top.
  Result<void> send(NodeId peer, std::span<const std::byte> payload, ServiceId service = 0);
  Result<void> send(NodeId peer, std::vector<std::byte> payload, ServiceId service = 0);

  // Adds a user of every session (see Services at the top): its dispatch gets the messages
  // sent to `service`, its on_event every session event. Any thread. Every message for
  // `service` that a loop reads after this call returned reaches the dispatch (a loop the
  // posted attach has not reached yet takes the user from the messenger's record); from
  // a thread other than a loop's, session events reach it once the posted attach did.
  // Errors: Errc::invalid_argument (service 0, which is create()'s; no dispatch; attached
  // already).
  Result<void> attach(ServiceId service, DispatchCallback dispatch, EventCallback on_event = {});
  // Removes a user; from a foreign thread, its callbacks may still run on a loop until the
  // removal reaches it (hold weak references in them).
  void detach(ServiceId service);

  // send() that names the message, for withdraw(): the session it was queued in (its
  // cookie) and its number there. Loop-thread-only. Errors: as send().
  struct Ticket {
    std::uint64_t session = 0;
    std::uint64_t seq = 0;
  };
  Result<Ticket> send_tracked(NodeId peer, std::vector<std::byte> payload, ServiceId service = 0);
  // Withdraws a message not yet acknowledged: its payload is dropped and it keeps its
  // number, so it is written (again, after a reconnect) as an empty message and the peer's
  // dispatch sees an empty payload instead of it. A message already delivered stays
  // delivered. Returns false when the message is no longer queued (acknowledged, or its
  // session reset). Used by RPC (include/rmsg/rpc.h) for expired and cancelled calls.
  // Loop-thread-only.
  bool withdraw(NodeId peer, Ticket ticket);

  // ---- Flow control (docs/messenger.md, Flow control) ----
  // Lanes: bulk messages are delivered in the order sent; a priority message may overtake
  // bulk messages sent before it (it waits behind at most one chunk of fragment_size), and
  // priority messages keep their order among themselves. Meant for small messages: acks of
  // the application, RPC replies, cancels and small calls. Bulk keeps a share: while bulk
  // has a chunk to send, one goes after every 64 KiB of priority chunks (each counted as
  // its bytes + 4 KiB: 16 small messages), so a priority lane that never empties cannot
  // hold bulk back (docs/messenger.md, Flow control).
  // A send() refused with resource_exhausted starts a refusal episode: once the session's
  // queue (and the messenger's) is at or below half its bounds, one SessionEvent::writable
  // for that peer ends it (once per episode; never without a refusal before). A refusal on
  // a foreign thread counts the same, also for a peer that has no session yet (refused by
  // the messenger-wide bound); the event runs on the peer's loop. The send()s with
  // SendOptions are callable from any thread; send_tracked is loop-thread-only.
  enum class Lane : std::uint8_t { bulk = 0, priority = 1 };
  struct SendOptions {
    Lane lane = Lane::bulk;
    ServiceId service = 0;  // as send(peer, payload, service)
  };
  Result<Ticket> send_tracked(NodeId peer, std::vector<std::byte> payload,
                              const SendOptions& options);
  Result<void> send(NodeId peer, std::vector<std::byte> payload, const SendOptions& options);
  // Graceful shutdown: from now on send() refuses (Errc::closed); incoming messages are
  // still dispatched. Once every session's queue is acknowledged, or at `deadline`
  // (messages still queued then are lost), every connection gets a close frame and a
  // graceful close, the sessions are dropped without events, and `done` runs (on the loop,
  // never inside this call). The messenger then stays closed. Called again, or after the
  // drain: `done` runs on the next turn. Destroying the messenger during the drain closes
  // at once and does not run `done`. Any thread; over several loops every loop drains its
  // sessions and `done` runs once, on the loop that finished last.
  void shutdown(Clock::time_point deadline, std::function<void()> done);
  // ---- end of Flow control ----

  // Drops the session with `peer` now (its connection closes; no event; queued messages
  // are lost) and forgets its address. The peer sees a reset when it comes back.
  void mark_down(NodeId peer);

  struct SessionInfo {
    bool connected = false;
    std::size_t queued = 0;       // messages not yet acknowledged (in flight included)
    std::size_t in_flight = 0;    // written on the current connection, not acknowledged
    std::uint64_t delivered = 0;  // the last message number handed to dispatch
    std::uint64_t connect_seq = 0;
    std::optional<Transport> transport;  // of the open connection; none when not connected
    // The open connection's peer proved it holds a key the keyring lists for this node id
    // (MessengerOptions::auth, docs/security.md); false when not connected.
    bool authenticated = false;
  };
  // Loop-thread-only.
  std::optional<SessionInfo> session_info(NodeId peer) const;
  NodeId node_id() const noexcept;
  const MessengerOptions& options() const noexcept;
  // Loop 0 (the only one with one loop); loops() all of them; loop_of(peer) the owner of
  // peer's session. Any thread.
  EventLoop& loop() const noexcept;
  std::size_t loop_count() const noexcept;
  EventLoop& loop_of(NodeId peer) const noexcept;

  // msg.* counters (docs/messenger.md lists them): messages sent/delivered/duplicates,
  // replays, acks, connects, accepts, sessions, resets, errors.<name> per cause;
  // switches.to_tcp / .to_rdma, replayed_across_switch, probes, probe_failures. One set
  // per loop: counters() is loop 0's, counters(i) loop i's, counter_total(name) the sum of
  // one counter over all loops. Any thread (values as CounterSet says).
  const CounterSet& counters() const noexcept;
  const CounterSet& counters(std::size_t loop_index) const noexcept;
  std::uint64_t counter_total(const std::string& name) const;

  class RMSG_HIDDEN Impl;   // one loop's sessions (a shard)
  class RMSG_HIDDEN Front;  // the shards, the services, the cross-thread handoff

 private:
  explicit Messenger(std::unique_ptr<Front> front);
  std::unique_ptr<Front> front_;
};

}  // namespace rmsg
