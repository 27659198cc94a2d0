#include "msg/out_queue.h"

#include <utility>

namespace rmsg::msg {

OutQueue::~OutQueue() {
  budget_->messages -= q_.size();
  budget_->bytes -= bytes_;
}

Result<Seq> OutQueue::push(Payload payload) {
  const std::size_t n = payload.size();
  if (q_.size() + 1 > limits_.max_messages || n > limits_.max_bytes ||
      bytes_ > limits_.max_bytes - n || !budget_->fits(n)) {
    return make_error_code(Errc::resource_exhausted);
  }
  const Seq seq = next_seq_++;
  q_.push_back(OutMessage{seq, std::move(payload)});
  bytes_ += n;
  budget_->messages += 1;
  budget_->bytes += n;
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
  budget_->messages -= 1;
  budget_->bytes -= n;
  acked_ = q_.front().seq;
  q_.pop_front();
}

Result<void> OutQueue::ack(Seq ack) {
  if (seq_at_or_before(ack, acked_)) return {};
  if (seq_after(ack, highest_written_)) return make_error_code(Errc::protocol_error);
  while (!q_.empty() && seq_at_or_before(q_.front().seq, ack)) drop_front();
  acked_ = ack;
  return {};
}

Handback OutQueue::take_all() {
  Handback h;
  while (!q_.empty()) {
    OutMessage& m = q_.front();
    auto& to =
        seq_at_or_before(m.seq, highest_written_) && highest_written_ != 0 ? h.unknown : h.unsent;
    const std::size_t n = m.payload.size();
    to.push_back(std::move(m.payload));
    bytes_ -= n;
    budget_->messages -= 1;
    budget_->bytes -= n;
    q_.pop_front();
  }
  cursor_ = 0;
  inflight_bytes_ = 0;
  return h;
}

}  // namespace rmsg::msg
