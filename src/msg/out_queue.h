// OutQueue: one session's outgoing messages, from send() until the peer acknowledged them.
// Pure logic (no I/O, no clock): the session driver asks it what to transmit next and tells
// it what was written, acknowledged or lost.
//
// Every message gets its sequence number when it is queued and keeps it for ever: a
// replay after a reconnect sends the same numbers again, so the receiver can drop what it
// already has. The queue is [acked+1 ... next_seq-1] in order; a cursor splits it into
// "written on the current connection" (before the cursor: in flight) and "not yet written
// on it" (from the cursor on). rewind() moves the cursor back to the front when a
// connection is lost; ack() drops messages off the front.
//
// Bounds: every queued message (in flight or not) counts against this session's limits
// and against the messenger-wide QueueBudget shared by all sessions; push() refuses
// (Errc::resource_exhausted) when either would be exceeded, so memory is bounded by
// configuration, not by how long a peer stays away. The in-flight window (messages written
// and not acknowledged) has its own, smaller bound: next() yields nothing while it is full.
//
// Threading: none (the messenger's loop thread owns it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "msg/seq.h"
#include "rmsg/result.h"

namespace rmsg::msg {

using Payload = std::vector<std::byte>;

// A bound on queued messages and their payload bytes: the messenger-wide total shared by
// every session, and each session's own (msg/admission.h keeps both). Atomic, because a
// send from a thread other than the session's loop reserves its share before it hands the
// message over (docs/messenger.md, Threading); the OutQueue releases it when the message
// leaves (acknowledged, withdrawn, handed back). A reservation never overshoots the bound;
// two racing near it may both be refused.
struct QueueBudget {
  std::size_t max_messages = 0;
  std::size_t max_bytes = 0;
  std::atomic<std::size_t> messages{0};
  std::atomic<std::size_t> bytes{0};
  // Takes one message of n bytes; false (nothing taken) when it does not fit.
  bool try_reserve(std::size_t n) noexcept {
    if (messages.fetch_add(1, std::memory_order_relaxed) + 1 > max_messages) {
      messages.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    if (n > max_bytes || bytes.fetch_add(n, std::memory_order_relaxed) > max_bytes - n) {
      if (n <= max_bytes) bytes.fetch_sub(n, std::memory_order_relaxed);
      messages.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void release(std::size_t count, std::size_t n) noexcept {
    messages.fetch_sub(count, std::memory_order_relaxed);
    bytes.fetch_sub(n, std::memory_order_relaxed);
  }
};

struct QueueLimits {
  std::size_t max_messages = 4096;                   // queued, in flight included
  std::size_t max_bytes = std::size_t{64} << 20;     // payload bytes queued
  std::size_t window_messages = 1024;                // written and not acknowledged
  std::size_t window_bytes = std::size_t{16} << 20;  // of those, payload bytes
};

struct OutMessage {
  Seq seq = 0;
  Payload payload;
  std::uint16_t service = 0;  // the session user it is for (MessageHeader::service)
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
  // which returns its share of both on destruction and in take_all().
  OutQueue(const QueueLimits& limits, QueueBudget& budget, QueueBudget* session = nullptr) noexcept
      : limits_(limits),
        budget_(&budget),
        own_{limits.max_messages, limits.max_bytes},
        session_(session != nullptr ? session : &own_) {}
  OutQueue(const OutQueue&) = delete;
  OutQueue& operator=(const OutQueue&) = delete;
  OutQueue(OutQueue&&) = delete;
  OutQueue& operator=(OutQueue&&) = delete;
  ~OutQueue();

  // Queues a message; returns its sequence number. Errors: Errc::resource_exhausted (this
  // session's or the messenger's bound is reached; nothing was queued).
  Result<Seq> push(Payload payload, std::uint16_t service = 0);
  // push() of a message whose share of both budgets the caller already reserved
  // (QueueBudget::try_reserve on each): it cannot be refused.
  Seq push_reserved(Payload payload, std::uint16_t service = 0);

  // The next message to write on the current connection, or null (nothing left, or the
  // window is full). Valid until the next non-const call.
  const OutMessage* next() const noexcept;
  // The message next() returned was written (accepted by the stream).
  void mark_written() noexcept;

  // The peer has delivered every message up to `ack`: they leave the queue. Older or equal
  // acks change nothing. Errors: Errc::protocol_error when `ack` names a message never
  // written (a peer acknowledging the future is broken).
  Result<void> ack(Seq ack);
  // The connection was lost: every message still queued is to be written again, in order,
  // on the next connection.
  void rewind() noexcept { cursor_ = 0, inflight_bytes_ = 0; }
  // Drops the payload of message `seq` if it is still queued (it keeps its number and
  // goes out empty); false when it is not queued. out_queue_withdraw.cc.
  bool withdraw(Seq seq) noexcept;
  // Session reset: empties the queue, handing every message back (see Handback).
  Handback take_all();

  std::size_t size() const noexcept { return q_.size(); }
  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t in_flight() const noexcept { return cursor_; }
  Seq acked() const noexcept { return acked_; }
  Seq last_queued() const noexcept { return next_seq_ - 1; }
  // The highest sequence number ever written on any connection (0: none).
  Seq highest_written() const noexcept { return highest_written_; }

 private:
  void drop_front();

  void release(std::size_t count, std::size_t n) noexcept {
    budget_->release(count, n);
    session_->release(count, n);
  }

  QueueLimits limits_;
  QueueBudget* budget_;
  QueueBudget own_;
  QueueBudget* session_;
  std::deque<OutMessage> q_;
  std::size_t cursor_ = 0;  // q_[0, cursor_) written on the current connection
  std::size_t bytes_ = 0;
  std::size_t inflight_bytes_ = 0;
  Seq next_seq_ = 1;
  Seq acked_ = 0;
  Seq highest_written_ = 0;
};

}  // namespace rmsg::msg
