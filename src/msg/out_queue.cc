#include "msg/out_queue.h"

#include <utility>

namespace rmsg::msg {

OutQueue::~OutQueue() {
  release(q_.size(), bytes_);
}

Result<Seq> OutQueue::push(Payload payload, std::uint16_t service) {
  const std::size_t n = payload.size();
  if (!session_->try_reserve(n)) return make_error_code(Errc::resource_exhausted);
  if (!budget_->try_reserve(n)) {
    session_->release(1, n);
    return make_error_code(Errc::resource_exhausted);
  }
  return push_reserved(std::move(payload), service);
}

Seq OutQueue::push_reserved(Payload payload, std::uint16_t service) {
  const Seq seq = next_seq_++;
  bytes_ += payload.size();
  q_.push_back(OutMessage{seq, std::move(payload), service});
  return seq;
}

const OutMessage* OutQueue::next() const noexcept {
  if (cursor_ >= q_.size()) return nullptr;
  const OutMessage& m = q_[cursor_];
  // The window admits one message whatever its size, so a message larger than
  // window_bytes still goes out (alone).
  if (cursor_ > 0 && (cursor_ + 1 > limits_.window_messages ||
                      inflight_bytes_ + m.payload.size() > limits_.window_bytes)) {
    return nullptr;
  }
  return &m;
}

void OutQueue::mark_written() noexcept {
  const OutMessage& m = q_[cursor_];
  inflight_bytes_ += m.payload.size();
  highest_written_ = seq_max(highest_written_, m.seq);
  ++cursor_;
}

void OutQueue::drop_front() {
  const std::size_t n = q_.front().payload.size();
  if (cursor_ > 0) {
    --cursor_;
    inflight_bytes_ -= n;
  }
  bytes_ -= n;
  acked_ = q_.front().seq;
  q_.pop_front();
}

Result<void> OutQueue::ack(Seq ack) {
  if (seq_at_or_before(ack, acked_)) return {};
  if (seq_after(ack, highest_written_)) return make_error_code(Errc::protocol_error);
  // The budgets are given back once per ack, not per message (atomic operations).
  std::size_t count = 0;
  std::size_t freed = 0;
  while (!q_.empty() && seq_at_or_before(q_.front().seq, ack)) {
    ++count;
    freed += q_.front().payload.size();
    drop_front();
  }
  if (count > 0) release(count, freed);
  acked_ = ack;
  return {};
}

Handback OutQueue::take_all() {
  Handback h;
  while (!q_.empty()) {
    OutMessage& m = q_.front();
    const bool unknown = seq_at_or_before(m.seq, highest_written_) && highest_written_ != 0;
    const std::size_t n = m.payload.size();
    (unknown ? h.unknown : h.unsent).push_back(std::move(m.payload));
    (unknown ? h.unknown_services : h.unsent_services).push_back(m.service);
    bytes_ -= n;
    release(1, n);
    q_.pop_front();
  }
  cursor_ = 0;
  inflight_bytes_ = 0;
  return h;
}

}  // namespace rmsg::msg
