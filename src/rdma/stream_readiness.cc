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
  // The task carries the stream's number, not a pointer kept alive (live_streams.h): a
  // trivially copyable lambda is stored inside the std::function, with no allocation.
  loop_.defer([live = live_.get(), id = live_id_] {
    if (RdmaStream* s = live->find(id)) s->notify_pass();
  });
}

// Runs a due callback, moved out while it runs (a copy of a std::function costs two
// indirect calls) and put back unless the callback set a new one or closed the stream.
// False when the callback destroyed the stream. Inlined into notify_pass (a call and its
// return cost ~20 instructions' time under qemu TCG, and this runs once per message).
[[gnu::always_inline]] inline bool RdmaStream::run_callback(Task& slot, const std::uint64_t& sets) {
  LiveStreams* const live = live_.get();
  const std::uint64_t id = live_id_;
  const std::uint64_t sets_before = sets;
  Task cb = std::move(slot);
  cb();
  if (live->find(id) == nullptr) return false;
  if (sets == sets_before && !closed()) slot = std::move(cb);
  return true;
}

// One notification pass. A callback may close or destroy the stream: after each, it is
// looked up again by number (locals only: `this` may be gone).
void RdmaStream::notify_pass() {
  notify_scheduled_ = false;
  if ((want_ & kWantRead) != 0 && on_readable_ && readable_now()) {
    want_ &= ~kWantRead;
    const std::uint64_t before = progress_;
    if (!run_callback(on_readable_, readable_sets_)) return;
    if (progress_ != before) want_ |= kWantRead;
  }
  if ((want_ & kWantWrite) != 0 && on_writable_ && writable_now()) {
    want_ &= ~kWantWrite;
    const std::uint64_t before = progress_;
    const std::uint64_t writes_before = write_calls_;
    if (!run_callback(on_writable_, writable_sets_)) return;
    if (progress_ != before) {
      want_ |= kWantWrite;
    } else if (write_calls_ == writes_before) {
      write_resting_ = true;
      write_rest_final_ = write_final();
    }
  }
  schedule_notify();
}

}  // namespace rmsg::rdma
