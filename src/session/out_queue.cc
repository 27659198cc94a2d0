#include "session/out_queue.h"

#include <algorithm>
#include <utility>

namespace rmsg::session {

OutQueue::~OutQueue() {
  release(q_.size(), bytes_);
  end_episode();
}

Result<Seq> OutQueue::push(Payload&& payload, Lane lane, std::uint16_t service) {
  // The budgets are the one source of truth for "full" (this peer's and the total), the
  // same ones a send from another thread reserves in (msg/admission.h).
  const std::size_t n = payload.size();
  if (!session_->try_reserve(n)) {
    note_refused(*session_, *budget_);
    return make_error_code(Errc::resource_exhausted);
  }
  if (!budget_->try_reserve(n)) {
    session_->release(1, n);
    note_refused(*session_, *budget_);
    return make_error_code(Errc::resource_exhausted);
  }
  return push_reserved(std::move(payload), lane, service);
}

Seq OutQueue::push_reserved(Payload&& payload, Lane lane, std::uint16_t service) {
  const std::size_t n = payload.size();
  const Seq seq = next_seq_++;
  // A lane with nothing left to start points past the end: the new message is its next,
  // the other lanes' stay past the end.
  // (Two lanes: the other one is the only one to look at.)
  static_assert(kLanes == 2);
  const std::size_t end = q_.size();
  std::size_t& other = cursor_[lane_index(lane == Lane::bulk ? Lane::priority : Lane::bulk)];
  if (other == end) other = end + 1;
  // Filled in place: the slot is a value-initialized OutMessage (msg/ring.h).
  OutMessage& m = q_.emplace_back();
  m.seq = seq;
  m.payload = std::move(payload);
  m.service = service;
  m.lane = lane;
  bytes_ += n;
  return seq;
}

std::size_t OutQueue::next_in_lane(std::size_t from, Lane lane) const noexcept {
  while (from < q_.size() && q_[from].lane != lane) ++from;
  return from;
}

bool OutQueue::admits(const OutMessage& m) const noexcept {
  // The window admits one message whatever its size, so a message larger than
  // window_bytes still goes out (alone). It always admits the oldest message: when the
  // window is full of priority messages numbered after it, none of them can be
  // acknowledged (acks are cumulative) before it is delivered.
  if (started_ == 0 || &m == &q_.front()) return true;
  if (started_ + 1 > limits_.window_messages) return false;
  return m.lane == Lane::priority || inflight_bytes_ + m.payload.size() <= limits_.window_bytes;
}

Chunk OutQueue::chunk_of(const OutMessage& m) const noexcept {
  const std::size_t left = m.payload.size() - m.sent;
  const std::size_t n = limits_.fragment_size == 0 ? left : std::min(left, limits_.fragment_size);
  return Chunk{.seq = m.seq,
               .lane = m.lane,
               .service = m.service,
               .bytes = std::span(m.payload).subspan(m.sent, n),
               .offset = m.sent,
               .more = n < left,
               .first = !m.started,
               .replay = m.ever_sent};
}

std::optional<Chunk> OutQueue::bulk_share() const noexcept {
  const std::size_t b = lane_index(Lane::bulk);
  if (partial_[b] != 0) return chunk_of(q_[static_cast<std::size_t>(partial_[b] - q_.front().seq)]);
  // Only ahead of every priority message not yet started: the receiver lets only the
  // priority lane skip numbers (reassembly.h), and the queue is in number order.
  const std::size_t i = cursor_[b];
  if (i < q_.size() && i < cursor_[lane_index(Lane::priority)] && admits(q_[i])) {
    return chunk_of(q_[i]);
  }
  return std::nullopt;
}

std::optional<Chunk> OutQueue::next() const noexcept {
  // The priority lane spent its credit (the bulk lane's share, out_queue.h): a bulk chunk
  // that may go goes first. Looked for only when the bulk lane has a chunk waiting (in
  // pieces, or a message not started): priority-only traffic spends the credit and never
  // gets it back.
  const std::size_t b = lane_index(Lane::bulk);
  if (credit_ <= 0 && (partial_[b] != 0 || cursor_[b] < q_.size())) [[unlikely]] {
    if (std::optional<Chunk> c = bulk_share()) return c;
  }
  // The lane's message to write next, if any (priority first; written out, not a loop over
  // a lane list, which went through memory on the per-message path).
  const auto in_lane = [this](Lane lane) -> const OutMessage* {
    const std::size_t l = lane_index(lane);
    if (partial_[l] != 0) return &q_[static_cast<std::size_t>(partial_[l] - q_.front().seq)];
    if (cursor_[l] < q_.size() && admits(q_[cursor_[l]])) return &q_[cursor_[l]];
    return nullptr;
  };
  const OutMessage* m = in_lane(Lane::priority);
  if (m == nullptr) m = in_lane(Lane::bulk);
  if (m == nullptr) return std::nullopt;
  return chunk_of(*m);
}

void OutQueue::mark_written() noexcept {
  if (const std::optional<Chunk> c = next()) mark_written(*c);
}

void OutQueue::mark_written(const Chunk& c) noexcept {
  const std::size_t l = lane_index(c.lane);
  OutMessage& m = q_[static_cast<std::size_t>(c.seq - q_.front().seq)];
  if (c.lane == Lane::bulk) {
    credit_ = full_credit();
  } else if (credit_ > 0) {
    credit_ -= static_cast<std::int64_t>(c.bytes.size() + limits_.chunk_charge);
  }
  if (c.first) {
    m.started = true;
    ++started_;
    if (m.lane == Lane::bulk) m.window = m.payload.size();
    inflight_bytes_ += m.window;
    cursor_[l] = next_in_lane(cursor_[l] + 1, m.lane);
  }
  m.sent += c.bytes.size();
  m.ever_sent = true;
  highest_written_ = seq_max(highest_written_, m.seq);
  if (c.more) {
    partial_[l] = m.seq;
    return;
  }
  partial_[l] = 0;
  m.ever_whole = true;
  if (m.withdraw_pending) drop_payload(m);
}

void OutQueue::rewind() noexcept {
  for (std::size_t i = 0; i < q_.size(); ++i) {
    OutMessage& m = q_[i];
    m.started = false;
    m.sent = 0;
    m.window = 0;
    if (m.withdraw_pending) drop_payload(m);
  }
  started_ = 0;
  inflight_bytes_ = 0;
  partial_ = {};
  credit_ = full_credit();
  for (const Lane lane : {Lane::priority, Lane::bulk}) {
    cursor_[lane_index(lane)] = next_in_lane(0, lane);
  }
}

void OutQueue::drop_payload(OutMessage& m) noexcept {
  const std::size_t n = m.payload.size();
  bytes_ -= n;
  release(0, n);
  Payload{}.swap(m.payload);
  m.withdraw_pending = false;
}

void OutQueue::drop_front() {
  OutMessage& m = q_.front();
  const std::size_t l = lane_index(m.lane);
  if (m.started) {
    --started_;
    inflight_bytes_ -= m.window;
  }
  // A partly written message the peer acknowledged: it has the message (from an earlier
  // connection) and drops the chunks it got of it here.
  if (partial_[l] == m.seq) partial_[l] = 0;
  bytes_ -= m.payload.size();
  acked_ = m.seq;
  if (pool_ != nullptr) pool_->give(std::move(m.payload));
  q_.pop_front();
  // Each lane's cursor moves down one index (written out: a loop over a list of lanes
  // went through memory on the per-ack path).
  const auto shift = [this](Lane lane) {
    std::size_t& cursor = cursor_[lane_index(lane)];
    cursor = cursor == 0 ? next_in_lane(0, lane) : cursor - 1;
  };
  shift(Lane::priority);
  shift(Lane::bulk);
}

Result<void> OutQueue::ack(Seq ack) {
  if (seq_at_or_before(ack, acked_)) return {};
  if (seq_after(ack, last_queued())) return make_error_code(Errc::protocol_error);
  // The budgets are given back once per ack, not per message (atomic operations).
  std::size_t count = 0;
  std::size_t freed = 0;
  while (!q_.empty() && seq_at_or_before(q_.front().seq, ack)) {
    if (!q_.front().ever_whole) {
      if (count > 0) release(count, freed);
      return make_error_code(Errc::protocol_error);
    }
    ++count;
    freed += q_.front().payload.size();
    drop_front();
  }
  if (count > 0) release(count, freed);
  q_.shrink_if_empty();
  acked_ = ack;
  return {};
}

Handback OutQueue::take_all() {
  Handback h;
  while (!q_.empty()) {
    OutMessage& m = q_.front();
    const std::size_t n = m.payload.size();
    (m.ever_sent ? h.unknown : h.unsent).push_back(std::move(m.payload));
    (m.ever_sent ? h.unknown_services : h.unsent_services).push_back(m.service);
    bytes_ -= n;
    release(1, n);
    q_.pop_front();
  }
  q_.shrink_if_empty();
  cursor_ = {};
  partial_ = {};
  started_ = 0;
  inflight_bytes_ = 0;
  credit_ = full_credit();
  return h;
}

bool OutQueue::take_writable() noexcept {
  return end_episode_with_room(*session_, *budget_);
}

bool OutQueue::end_episode() noexcept {
  // exchange: a refusal on another thread may start the episode again right after.
  if (!session_->refused.exchange(false, std::memory_order_acq_rel)) return false;
  budget_->refused_queues.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

}  // namespace rmsg::session
