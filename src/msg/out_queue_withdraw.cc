// OutQueue::withdraw (RPC's expired and cancelled calls): the message stays in the queue
// under its number, so the receiver sees no gap, but carries nothing any more.
#include "msg/out_queue.h"

namespace rmsg::msg {

bool OutQueue::withdraw(Seq seq) noexcept {
  if (q_.empty() || seq_after(q_.front().seq, seq) || seq_after(seq, q_.back().seq)) {
    return false;
  }
  const std::size_t index = static_cast<std::size_t>(seq - q_.front().seq);
  Payload& p = q_[index].payload;
  const std::size_t n = p.size();
  if (index < cursor_) inflight_bytes_ -= n;
  bytes_ -= n;
  release(0, n);
  Payload{}.swap(p);
  return true;
}

}  // namespace rmsg::msg
