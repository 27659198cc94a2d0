// wait_on_loop (front_sync.h): a thread blocked waiting for one loop still runs what other
// blocked threads wait on its own loop to run. One table for the process: a waiter cannot
// tell which loop (if any) it is the thread of, but it can ask each waiting entry's loop
// whether it is (EventLoop::in_loop_thread), and only teardown paths wait here.
#include "msg/front_sync.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "base/debug_assert.h"
#include "loop/loop_thread.h"
#include "rmsg/log.h"

namespace rmsg::msg {
namespace {

struct Entry {
  EventLoop* loop;
  const std::function<void()>* f;  // the waiter's: valid until done
  bool claimed = false;            // someone runs f (the loop's task or a blocked thread)
  bool done = false;
};

struct Table {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::shared_ptr<Entry>> waiting;  // entries not yet done
};

Table& table() {
  static Table t;
  return t;
}

// Runs a claimed entry with the lock released, then marks it done for its waiter.
void run_claimed(Table& t, const std::shared_ptr<Entry>& e, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  (*e->f)();
  lock.lock();
  e->done = true;
  std::erase(t.waiting, e);
  t.cv.notify_all();
}

// LoopThreads::stop() joined the loop's thread: the wait would never end. A bug of the
// caller (loop_threads.h: destroy what lives on the loops while they run): Debug builds
// abort; release builds say so and run `f` here, which the join made safe (no thread runs
// the loop).
void orphaned_loop(const std::function<void()>& f) {
  RMSG_LOG(error,
           "messenger: teardown waits on a loop whose thread was stopped; destroy what "
           "lives on the loops before LoopThreads::stop()");
  RMSG_DEBUG_ASSERT(!"waiting on a stopped loop");
  f();
}

}  // namespace

void wait_on_loop(EventLoop& loop, const std::function<void()>& f) {
  if (loop.in_loop_thread()) return f();
  if (loop::Access::orphaned(loop)) return orphaned_loop(f);
  Table& t = table();
  auto mine = std::make_shared<Entry>(Entry{&loop, &f});
  {
    const std::lock_guard lock(t.mu);
    t.waiting.push_back(mine);
  }
  // The loop runs it unless a blocked thread of that loop claimed it first; the task may
  // run after this call returned (the entry is shared), and then does nothing.
  loop.post([mine] {
    Table& tt = table();
    std::unique_lock lock(tt.mu);
    if (mine->claimed) return;
    mine->claimed = true;
    run_claimed(tt, mine, lock);
  });
  std::unique_lock lock(t.mu);
  while (!mine->done) {
    auto ours = std::find_if(t.waiting.begin(), t.waiting.end(), [](const auto& e) {
      return !e->claimed && e->loop->in_loop_thread();
    });
    if (ours == t.waiting.end()) {
      t.cv.wait(lock);
      continue;
    }
    const std::shared_ptr<Entry> e = *ours;
    e->claimed = true;
    run_claimed(t, e, lock);
  }
}

}  // namespace rmsg::msg
