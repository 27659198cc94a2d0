// RdmaStream: readiness — when on_readable / on_writable run (rdma_stream.h, "ready").
//
// A callback runs when its condition becomes true (changed(): a completion reaped, a
// state change), when it is set while the condition holds, and again after a call only
// if that call made progress; an unchanged state is never reported twice, so an idle
// stream costs its loop nothing.
#include "loop/loop_thread.h"
#include "rdma/rdma_stream.h"

namespace rmsg::rdma {

void RdmaStream::on_readable(Task callback) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  on_readable_ = std::move(callback);
  ++readable_sets_;
  want_ |= kWantRead;
  schedule_notify();
}

void RdmaStream::on_writable(Task callback) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  on_writable_ = std::move(callback);
  ++writable_sets_;
  write_resting_ = false;
  want_ |= kWantWrite;
  schedule_notify();
}

// True also when write() would report an error: failed, the peer gone, or after our own
// shutdown_write() (Errc::shutdown), as stream.h promises.
bool RdmaStream::writable_now() const {
  if (write_final()) return true;
  // write() takes bytes whenever they can be posted or staged (rdma_stream.h, "send").
  return established() && send_ring_.can_stage(max_message_);
}

// The pass is due outside a poll (schedule_notify, rdma_stream.h): through defer().
void RdmaStream::defer_notify() {
  // The task carries only the stream's token (loop/alive.h): a trivially copyable lambda
  // is stored inside the std::function, with no allocation.
  loop_.defer([alive = alive_.token()] {
    if (RdmaStream* s = alive.get()) s->notify_pass();
  });
}

}  // namespace rmsg::rdma
