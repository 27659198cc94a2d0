// RdmaStream: graceful close (rdma_stream.h, close()). A stream closed after
// shutdown_write() stays in ConnState::lingering: its completions are still polled, what
// the peer still sends is read and dropped (its receives re-posted, so that credits keep
// coming back and a FIN waiting for them goes out), until the FIN's send completion says
// that the peer's transport has every byte and the FIN. Then, or on an error, past
// RdmaOptions::linger_timeout, or when the loop is destroyed, it tears down as close()
// does. Once the handle lets go (release()) the stream owns itself (self_).
#include "rdma/rdma_stream.h"
#include "rmsg/log.h"

namespace rmsg::rdma {

void RdmaStream::start_linger() {
  enter(ConnState::lingering);
  linger_timer_ = loop_.add_timer(options_.linger_timeout, [this] {
    linger_timer_ = 0;
    RMSG_LOG(info, "rdma stream: linger timeout, closing abortively");
    schedule_linger_end();
  });
  // The loop goes away first: abort, and free what the loop owns.
  destroy_hook_ = loop_.add_destroy_hook([this] {
    destroy_hook_ = 0;
    end_linger().reset();  // may destroy this stream
  });
  linger_progress();
}

void RdmaStream::release(std::unique_ptr<StreamImpl> self) noexcept {
  if (conn_ != ConnState::lingering) return self.reset();
  self_.reset(static_cast<RdmaStream*>(self.release()));
}

void RdmaStream::discard_received() {
  while (!recv_ring_.empty() && !error_ && !qp_error_) {
    const RecvRing::Front f = recv_ring_.front();
    if (recv_ring_.consume(f.len - f.offset)) {
      if (auto rp = repost(f.block); !rp) return fail(rp.error());
    }
  }
}

void RdmaStream::linger_progress() {
  if (error_ || qp_error_ || tx_ == TxState::fin_acked) return schedule_linger_end();
  discard_received();
  flush_control();  // the FIN once credits allow, credits for what was dropped
  if (error_ || qp_error_ || tx_ == TxState::fin_acked) schedule_linger_end();
}

// Never inside a poll or a CM event: teardown releases what they still use.
void RdmaStream::schedule_linger_end() {
  if (linger_end_scheduled_) return;
  linger_end_scheduled_ = true;
  loop_.defer([this, alive = alive_.token()] {
    if (!alive.alive() || conn_ != ConnState::lingering) return;
    end_linger().reset();  // may destroy this stream
  });
}

// Tears down; returns the stream's ownership of itself for the caller to drop.
std::unique_ptr<RdmaStream> RdmaStream::end_linger() {
  if (linger_timer_ != 0) loop_.cancel_timer(std::exchange(linger_timer_, 0));
  if (destroy_hook_ != 0) loop_.remove_destroy_hook(std::exchange(destroy_hook_, 0));
  RMSG_LOG(debug, "rdma stream: linger ends (%s)",
           tx_ == TxState::fin_acked ? "FIN acknowledged" : "abortive");
  teardown(true);
  return std::move(self_);
}

}  // namespace rmsg::rdma
