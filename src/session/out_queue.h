// OutQueue: one session's outgoing messages, from send() until the peer acknowledged them.
// Pure logic (no I/O, no clock): the session driver asks it what to transmit next and tells
// it what was written, acknowledged or lost.
//
// Every message gets its sequence number when it is queued and keeps it for ever: a
// replay after a reconnect sends the same numbers again, so the receiver can drop what it
// already has. The queue is [acked+1 ... next_seq-1] in order.
//
// Lanes and fragments (docs/messenger.md, Flow control): each message belongs to a lane,
// bulk or priority. A message larger than `fragment_size` goes out as several chunks (one
// frame each, all carrying its number). next() prefers the priority lane: a priority
// message starts (or continues) before the next chunk of a bulk message, so a small
// priority message waits behind at most one chunk. The bulk lane's share: while bulk has
// a chunk that may go, priority chunks spend a credit (`priority_credit`, each chunk its
// bytes plus `chunk_charge`); once it is spent, one bulk chunk goes first and the credit
// starts again, so a priority lane that never empties cannot hold bulk back for good. A
// bulk message starts that way only ahead of every priority message not yet started (the
// receiver's rule: only the priority lane skips numbers). Within a lane messages start in
// number order and a message's chunks are consecutive; a lane has at most one message
// partly written. rewind() (the connection was lost) restarts every message from its first chunk;
// ack() drops messages off the front (a partly written one too: the receiver already has
// it and drops the rest of its chunks).
//
// Bounds: every queued message (in flight or not) counts against this session's limits
// and against the messenger-wide QueueBudget shared by all sessions; push() refuses
// (Errc::resource_exhausted) when either would be exceeded, so memory is bounded by
// configuration, not by how long a peer stays away. A refusal starts an episode that
// take_writable() ends once the queue (and the budget) is below half its bounds. The
// in-flight window (messages started on the connection and not acknowledged) has its own,
// smaller bound: no new message starts while it is full (bytes count for bulk only),
// except the oldest one queued, which the acks of all the others wait for.
//
// Threading: none (the messenger's loop thread owns it).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "rmsg/result.h"
#include "session/payload_pool.h"
#include "session/ring.h"
#include "session/vocabulary.h"
#include "wire/seq.h"

namespace rmsg::session {

using Payload = std::vector<std::byte>;

// The lane of a message (its number is the lane byte of the message header's flags).
enum class Lane : std::uint8_t { bulk = 0, priority = 1 };
inline constexpr std::size_t kLanes = 2;

// A bound on queued messages and their payload bytes: the messenger-wide total shared by
// every session, and each session's own (msg/admission.h keeps both). Atomic, because a
// send from a thread other than the session's loop reserves its share before it hands the
// message over (docs/messenger.md, Threading); the OutQueue releases it when the message
// leaves (acknowledged, withdrawn, handed back). A reservation never overshoots the bound;
// two racing near it may both be refused.
//
// The budgets are also the one record of a refusal episode (SessionEvent::writable): a
// refused reservation, on whatever thread, sets `refused` on the peer's budget (and counts
// the peer in the total's `refused_queues`); the session's loop ends the episode
// (OutQueue::take_writable) once both budgets are at or below half their bounds.
//
// Messages and bytes share one atomic word (the count in the top 24 bits, the bytes in the
// low 40), so a reservation or a release is one read-modify-write, not two. Bounds above
// kMaxMessages or kMaxBytes act as those; the word cannot carry from bytes into the count
// while fewer than 240 reservations of at most 4 GiB (the messenger's largest message) race
// on one budget.
struct QueueBudget {
  static constexpr unsigned kByteBits = 40;
  static constexpr std::uint64_t kOneMessage = std::uint64_t{1} << kByteBits;
  static constexpr std::uint64_t kByteMask = kOneMessage - 1;
  static constexpr std::size_t kMaxMessages = std::size_t{1} << 23;
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 36;

  QueueBudget() noexcept = default;
  QueueBudget(std::size_t message_bound, std::size_t byte_bound) noexcept
      : max_messages(std::min(message_bound, kMaxMessages)),
        max_bytes(std::min(byte_bound, kMaxBytes)) {}

  std::size_t max_messages = 0;
  std::size_t max_bytes = 0;
  std::atomic<std::uint64_t> used{0};          // messages << kByteBits | bytes
  std::atomic<bool> refused{false};            // a peer's budget: in a refusal episode
  std::atomic<std::size_t> refused_queues{0};  // the total: peers in a refusal episode

  std::size_t messages() const noexcept {
    return static_cast<std::size_t>(used.load(std::memory_order_relaxed) >> kByteBits);
  }
  std::size_t bytes() const noexcept {
    return static_cast<std::size_t>(used.load(std::memory_order_relaxed) & kByteMask);
  }
  // Takes one message of n bytes; false (nothing taken) when it does not fit.
  bool try_reserve(std::size_t n) noexcept {
    if (n > max_bytes) return false;
    const std::uint64_t add = kOneMessage + n;
    const std::uint64_t now = used.fetch_add(add, std::memory_order_relaxed) + add;
    if ((now >> kByteBits) > max_messages || (now & kByteMask) > max_bytes) {
      used.fetch_sub(add, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void release(std::size_t count, std::size_t n) noexcept {
    used.fetch_sub(count * kOneMessage + n, std::memory_order_relaxed);
  }
  bool below_half() const noexcept {
    const std::uint64_t u = used.load(std::memory_order_relaxed);
    return (u >> kByteBits) <= max_messages / 2 && (u & kByteMask) <= max_bytes / 2;
  }
};

// Starts a refusal episode of the peer whose budget is `session` (any thread; once per
// episode however many sends are refused). True for the refusal that started it.
inline bool note_refused(QueueBudget& session, QueueBudget& total) noexcept {
  if (session.refused.exchange(true, std::memory_order_acq_rel)) return false;
  total.refused_queues.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

// Ends the refusal episode of the peer whose budget is `session` once it and `total` are at
// or below half their bounds: true once per episode (SessionEvent::writable is due).
inline bool end_episode_with_room(QueueBudget& session, QueueBudget& total) noexcept {
  if (!session.refused.load(std::memory_order_acquire) || !session.below_half() ||
      !total.below_half()) {
    return false;
  }
  // exchange: a refusal on another thread may start the episode again right after.
  if (!session.refused.exchange(false, std::memory_order_acq_rel)) return false;
  total.refused_queues.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

struct QueueLimits {
  std::size_t max_messages = 4096;                    // queued, in flight included
  std::size_t max_bytes = std::size_t{64} << 20;      // payload bytes queued
  std::size_t window_messages = 1024;                 // started and not acknowledged
  std::size_t window_bytes = std::size_t{16} << 20;   // of those, bulk payload bytes
  std::size_t fragment_size = std::size_t{64} << 10;  // chunk size; 0: never split
  // The bulk lane's share (see the top): priority bytes (plus chunk_charge per chunk)
  // written while a bulk chunk waits, after which that bulk chunk goes. The defaults give
  // one bulk chunk per 16 small priority messages, or per 64 KiB of larger ones.
  std::size_t priority_credit = std::size_t{64} << 10;
  std::size_t chunk_charge = std::size_t{4} << 10;
};

struct OutMessage {
  Seq seq = 0;
  Payload payload;
  std::uint16_t service = 0;  // the session user it is for (MessageHeader::service)
  Lane lane = Lane::bulk;
  std::size_t sent = 0;           // bytes written on the current connection
  std::size_t window = 0;         // bytes it holds of the window (bulk, started)
  bool started = false;           // its first chunk was written on the current connection
  bool ever_sent = false;         // a chunk was written on some connection
  bool ever_whole = false;        // its last chunk was written on some connection
  bool withdraw_pending = false;  // withdrawn while partly written: dropped when complete
};

// One chunk to write: `bytes` of message `seq` starting at `offset`.
struct Chunk {
  Seq seq = 0;
  Lane lane = Lane::bulk;
  std::uint16_t service = 0;
  std::span<const std::byte> bytes;
  std::size_t offset = 0;
  bool more = false;    // more chunks of the message follow
  bool first = false;   // the message's first chunk on this connection
  bool replay = false;  // the message was written on an earlier connection
};

// What a session reset hands back to the application, oldest first.
struct Handback {
  std::vector<Payload> unknown;  // written at least once, never acknowledged
  std::vector<Payload> unsent;   // never written to any connection
  // The service of each message, index by index.
  std::vector<std::uint16_t> unknown_services;
  std::vector<std::uint16_t> unsent_services;
};

class OutQueue {
 public:
  // `budget` (the messenger's) and `session` (this peer's, when given: it outlives the
  // session object; else the queue keeps its own from `limits`) must outlive the queue,
  // which returns its share of both on destruction and in take_all() (and ends a refusal
  // episode on destruction: the session's next queue starts empty).
  // `pool` (the shard's, optional; it must outlive the queue) gets the payloads the peer
  // acknowledged.
  OutQueue(const QueueLimits& limits, QueueBudget& budget, QueueBudget* session = nullptr,
           PayloadPool* pool = nullptr) noexcept
      : limits_(limits),
        budget_(&budget),
        own_{limits.max_messages, limits.max_bytes},
        session_(session != nullptr ? session : &own_),
        pool_(pool),
        credit_(full_credit()) {}
  OutQueue(const OutQueue&) = delete;
  OutQueue& operator=(const OutQueue&) = delete;
  OutQueue(OutQueue&&) = delete;
  OutQueue& operator=(OutQueue&&) = delete;
  ~OutQueue();

  // Queues a message; returns its sequence number. Errors: Errc::resource_exhausted (this
  // session's or the messenger's bound is reached; nothing was queued; an episode starts).
  // The payload is taken by reference (moved from only when queued): on the per-message
  // path a by-value parameter cost a move at each of the two calls.
  Result<Seq> push(Payload&& payload, Lane lane = Lane::bulk, std::uint16_t service = 0);
  // push() of a message whose share of both budgets the caller already reserved
  // (QueueBudget::try_reserve on each): it cannot be refused.
  Seq push_reserved(Payload&& payload, Lane lane = Lane::bulk, std::uint16_t service = 0);

  // The next chunk to write on the current connection, or none (nothing left, or the
  // window is full). Its bytes are valid until the next non-const call.
  std::optional<Chunk> next() const noexcept;
  // The chunk next() returned was written (accepted by the stream).
  void mark_written() noexcept;
  // The same, given that chunk (next()'s answer, no call in between): spares computing it
  // again.
  void mark_written(const Chunk& c) noexcept;

  // The peer has delivered every message up to `ack`: they leave the queue. Older or equal
  // acks change nothing. Errors: Errc::protocol_error when `ack` names a message never
  // written whole (a peer acknowledging the future is broken).
  Result<void> ack(Seq ack);
  // The connection was lost: every message still queued is to be written again, from its
  // first chunk, on the next connection.
  void rewind() noexcept;
  // Drops the payload of message `seq` if it is still queued (it keeps its number and
  // goes out empty; one partly written goes out whole first); false when it is not queued.
  // out_queue_withdraw.cc.
  bool withdraw(Seq seq) noexcept;
  // Session reset: empties the queue, handing every message back (see Handback).
  Handback take_all();

  // Ends a refusal episode: true once after a refusal (push() here, or a reservation on
  // another thread), when this peer's budget is at or below half its bounds and the
  // messenger-wide budget too.
  bool take_writable() noexcept;
  bool refused() const noexcept { return session_->refused.load(std::memory_order_acquire); }

  std::size_t size() const noexcept { return q_.size(); }
  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t in_flight() const noexcept { return started_; }
  // Every queued message started and none partly written: next() has nothing (a cheaper
  // test than calling it, for the usual end of a pump).
  bool all_written() const noexcept {
    return started_ == q_.size() && partial_[0] == 0 && partial_[1] == 0;
  }
  Seq acked() const noexcept { return acked_; }
  Seq last_queued() const noexcept { return next_seq_ - 1; }
  // The highest sequence number ever written on any connection (0: none).
  Seq highest_written() const noexcept { return highest_written_; }

 private:
  std::size_t lane_index(Lane lane) const noexcept { return static_cast<std::size_t>(lane); }
  std::size_t next_in_lane(std::size_t from, Lane lane) const noexcept;
  bool admits(const OutMessage& m) const noexcept;
  std::optional<Chunk> bulk_share() const noexcept;  // the bulk chunk that may go, if any
  std::int64_t full_credit() const noexcept {
    return static_cast<std::int64_t>(limits_.priority_credit);
  }
  Chunk chunk_of(const OutMessage& m) const noexcept;
  void drop_payload(OutMessage& m) noexcept;
  void drop_front();
  bool end_episode() noexcept;  // true: an episode was running

  void release(std::size_t count, std::size_t n) noexcept {
    budget_->release(count, n);
    session_->release(count, n);
  }

  QueueLimits limits_;
  QueueBudget* budget_;
  QueueBudget own_;
  QueueBudget* session_;
  PayloadPool* pool_;
  Ring<OutMessage> q_;  // session/ring.h: index arithmetic, no deque block map
  std::array<std::size_t, kLanes> cursor_{};  // per lane: index of the next message to start
  std::array<Seq, kLanes> partial_{};         // per lane: the message partly written (0: none)
  std::size_t started_ = 0;                   // messages started on this connection
  std::size_t bytes_ = 0;
  std::size_t inflight_bytes_ = 0;  // bulk payload bytes of the started messages
  std::int64_t credit_;             // the priority lane's, until a bulk chunk goes (top)
  Seq next_seq_ = 1;
  Seq acked_ = 0;
  Seq highest_written_ = 0;
};

}  // namespace rmsg::session
