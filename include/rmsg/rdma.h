// RDMA transport: the Stream / Listener of rmsg/stream.h over an RDMA reliable-connected
// queue pair (rdma-core: librdmacm for setup, libibverbs for data). Wire format:
// docs/protocol.md.
//
// Threading: everything is loop-thread-only (the loop passed in); callbacks run on that
// loop's thread. No thread is created: setup runs on the loop from the rdma_cm event
// channel, completions from the loop's pollers (each stream registers its CQs: polled
// while the loop spins or busy-polls, armed before it sleeps; their events come through
// one completion channel per loop and device, so a stream holds no descriptor of its own).
//
// Resources per stream: one PD (shared per device under a ConnectionManager), a send CQ
// and a receive CQ (on the loop's completion channel for the device), one QP, a send ring
// of send_block_count x send_block_size bytes and a receive ring of recv_block_count x
// recv_block_size bytes, both registered (pinned) memory. The default
// geometry (8 x 64 KiB each way) registers 1 MiB per stream: a 64 KiB write is one SEND,
// which under Soft-RoCE moved 64 KiB streaming from ~0.8x to ~0.9x of raw verbs against
// 16 x 32 KiB (docs/perf.md). A write that can go at once takes a block and a credit of
// its own; writes that find no credit share blocks (staged, docs/protocol.md), so many
// small writes in flight do not each hold a receive block's worth of credit.
//
// Errors beyond stream.h's: system codes from rdma-core (ENODEV: no RDMA stack or device;
// EADDRNOTAVAIL: no RDMA device on that address), Errc::address_error / route_error /
// unreachable / rejected / connection_refused / version_mismatch / timeout during setup,
// and work-completion codes (wc_category()) when the transport fails a request.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <system_error>

#include "rmsg/address.h"
#include "rmsg/counters.h"
#include "rmsg/event_loop.h"
#include "rmsg/export.h"
#include "rmsg/rdma_errors.h"
#include "rmsg/result.h"
#include "rmsg/stream.h"

namespace rmsg {

struct RMSG_EXPORT RdmaOptions {
  // Ring geometry. A message (one SEND) carries at most min(our send_block_size, the
  // peer's recv_block_size) bytes. recv_block_count is the credit window the peer gets;
  // it must be at least 4 (docs/protocol.md, credits). Limits: block sizes 64 B..16 MiB,
  // counts 4..4096 (send_block_count >= 1).
  std::uint32_t send_block_size = 64 * 1024;
  std::uint32_t send_block_count = 8;
  std::uint32_t recv_block_size = 64 * 1024;
  std::uint32_t recv_block_count = 8;
  // Inline data requested at QP creation; the device may grant less (rxe: 512 at most),
  // which is probed downwards. Messages up to the granted size, and no longer than the
  // peer's receive block, are sent inline.
  std::uint32_t inline_size = 256;

  // Transport retry parameters of the QP (RC): retransmissions before a send fails, RNR
  // retries (0: a receiver-not-ready is an error at once; credits make RNR impossible),
  // and the local ACK timeout exponent (4.096 us * 2^ack_timeout; 14 = ~67 ms).
  // Soft-RoCE (rxe) retries for ever when retry_count is 7: use 6 or less there for a
  // bounded transport timeout (docs/protocol.md, Keepalive).
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry_count = 0;
  std::uint8_t ack_timeout = 14;

  // Per-step setup deadlines: address and route resolution each, then the handshake
  // (connect request to established).
  std::chrono::milliseconds resolve_timeout{2000};
  std::chrono::milliseconds connect_timeout{5000};
  // Listener (the options it was given; for a connection manager's routed accepts, the
  // listen params'): connect requests accepted and not yet established that one loop
  // holds at once. Each holds a QP, its CQs and registered rings (about 1 MiB at the
  // default geometry) for up to connect_timeout, for an unauthenticated peer; a request
  // beyond is rejected (reason `resources`, the peer sees Errc::resource_exhausted)
  // before anything is built or taken from a pool. 0: no bound.
  std::uint32_t max_inbound_handshakes = 32;
  // Listener: the verbs and rdma_cm setup calls one loop makes per iteration for the
  // connect requests it accepts (each accept counts as the 11 calls a fresh structure and
  // its accept take). Requests beyond wait, in arrival order, for a later iteration (they
  // count against max_inbound_handshakes meanwhile), so a burst of connects does not hold
  // the loop for all their setup at once. The bound is per loop: the smallest value among
  // the listeners and connection managers accepting on it applies to the request at hand.
  // 0: no bound.
  std::uint32_t max_setup_calls_per_iteration = 22;

  // Liveness (docs/protocol.md, Keepalive). A stream that has posted no message for
  // keepalive_interval sends a KEEPALIVE (or, stalled on credits, a zero-length RDMA WRITE
  // as a window probe); a peer gone without a word then shows up as a failed send
  // (retries exhausted) on a link that is down. Once the peer has sent a
  // KEEPALIVE, a stream that receives nothing for idle_timeout while the peer holds the
  // credits to send fails with Errc::timeout (a peer process that stopped). Zero turns
  // either off; idle_timeout must exceed the peer's keepalive_interval.
  std::chrono::milliseconds keepalive_interval{1000};
  std::chrono::milliseconds idle_timeout{10000};

  // Graceful close (Stream::close() after shutdown_write()): the loop keeps the connection
  // until the peer's transport has acknowledged our FIN (every byte before it delivered,
  // which needs the peer to return credits, i.e. to keep reading), then disconnects. Past
  // linger_timeout, or when the loop is destroyed first, the close is abortive (the peer
  // sees connection_reset unless it already read our EOF). Zero: close() always aborts.
  std::chrono::milliseconds linger_timeout{5000};

  // Shared receive (docs/protocol.md, Shared receive): when set, the stream offers the mode
  // (hello feature bit 0) and takes its receives from one pool per loop and device, a
  // shared receive queue of `shared_connections * shared_guaranteed + shared_lease_blocks`
  // blocks of shared_block_size bytes (the first stream on the loop and device sizes it):
  // each connection always has shared_guaranteed credits (>= 4) and busy ones lease up to
  // shared_window. A connection beyond shared_connections on the pool is refused
  // (Errc::resource_exhausted, counted as srq_admit_refused), never an RNR later. recv_block_*
  // then apply only to a peer that does not take the mode (an acceptor answers it with
  // per-stream rings). Only for streams outside a connection manager (its pooled
  // structures are per-stream rings). Off: per-stream rings, faster for bulk streaming
  // between two nodes (64 KiB SENDs).
  bool shared_receive = false;
  std::uint32_t shared_block_size = 4096;
  std::uint32_t shared_guaranteed = 4;
  std::uint32_t shared_window = 32;
  std::uint32_t shared_connections = 256;
  std::uint32_t shared_lease_blocks = 256;
};

// Binds `address` (port 0 picks a free port: Listener::port()) on the RDMA device that owns
// that IP and starts listening. Every connection that completes the handshake is handed
// to `on_accept` on the loop thread. Errors: ENODEV (no RDMA stack), EADDRNOTAVAIL,
// EADDRINUSE, Errc::invalid_argument (bad geometry).
RMSG_EXPORT Result<Listener> rdma_listen(EventLoop& loop, const SocketAddress& address,
                                         const RdmaOptions& options, AcceptCallback on_accept);

// Connects to `peer`. Returns at once; `done` runs exactly once, on the loop thread, never
// inside this call, with a connected Stream or the setup error.
RMSG_EXPORT void rdma_connect(EventLoop& loop, const SocketAddress& peer,
                              const RdmaOptions& options, ConnectCallback done);

// What an RDMA stream negotiated and counted (for tests and tools). Errc::invalid_argument
// if `stream` is not an RDMA stream.
struct RMSG_EXPORT RdmaStreamInfo {
  std::uint32_t max_message = 0;     // bytes per SEND: min(our send block, peer recv block)
  std::uint32_t inline_granted = 0;  // inline size the device granted
  std::uint32_t credits = 0;         // sends we may post now
  std::uint32_t peer_recv_blocks = 0;
  std::uint64_t data_messages_sent = 0;
  std::uint64_t credit_messages_sent = 0;  // credit-only control messages
  std::uint64_t credit_stalls = 0;         // writes that stopped for lack of credits
  std::uint64_t send_completions = 0;      // signalled send completions reaped
  std::uint64_t send_posts = 0;   // ibv_post_send calls: a write() posts its messages as one chain
  bool shared_receive = false;    // our receives come from the loop's shared pool
  std::uint32_t recv_window = 0;  // shared receive: the peer's credit window now (G + lease)
};
RMSG_EXPORT Result<RdmaStreamInfo> rdma_stream_info(const Stream& stream);

// Counters (rmsg/counters.h) of one RDMA stream: bytes_sent/_received, messages_sent/
// _received (data), control_messages_sent, keepalives_sent/_received, probes_sent
// (window probes of a writer stalled on credits), credit_stalls, write_would_block,
// read_would_block, bytes_staged (written while no SEND could go: staged), inline_sends
// (writes posted inline from the caller's bytes, no send block), idle_timeouts,
// wc_flushed, rnr_retry_exceeded, wc_error.<status>, async_event.<type>. Null when `stream` is not
// an RDMA stream or has no device yet; valid while the stream lives.
RMSG_EXPORT const CounterSet* rdma_stream_counters(const Stream& stream);
// One of those counters summed over every stream of the process on `device_name`, the
// live ones and those closed (0 for a name or device never counted). Thread-safe; summed
// when called (a stream counts on its own loop thread, with no counter shared per message),
// so live streams' counts are read as their loops wrote them a moment ago.
RMSG_EXPORT std::uint64_t rdma_device_counter(std::string_view device_name, std::string_view name);
// "rdma.<device>.<counter> <value>" lines, sorted, for every device that had a stream.
RMSG_EXPORT void rdma_dump_device_counters(std::ostream& out);

// True when an RDMA device with an ACTIVE port is present.
RMSG_EXPORT bool rdma_device_available();

}  // namespace rmsg
