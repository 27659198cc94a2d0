// OutQueue::withdraw (RPC's expired and cancelled calls): the message stays in the queue
// under its number, so the receiver sees no gap, but carries nothing any more.
#include "session/out_queue.h"

namespace rmsg::session {

bool OutQueue::withdraw(Seq seq) noexcept {
  if (q_.empty() || seq_after(q_.front().seq, seq) || seq_after(seq, q_.back().seq)) {
    return false;
  }
  OutMessage& m = q_[static_cast<std::size_t>(seq - q_.front().seq)];
  // Partly written: its remaining chunks still go (the receiver cannot take half a
  // message); a replay after a reconnect carries it empty.
  if (m.started && m.sent < m.payload.size()) {
    m.withdraw_pending = true;
    return true;
  }
  drop_payload(m);
  return true;
}

}  // namespace rmsg::session
