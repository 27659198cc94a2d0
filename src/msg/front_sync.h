// What the fronts over N loops (Messenger::Front, RpcEndpoint::Front) share to act on
// every shard: run something on a shard's loop, wait for one loop to run something, and
// join N completions into one.
//
// Threading: any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "loop/loop_thread.h"
#include "rmsg/event_loop.h"

namespace rmsg::msg {

// Runs f(*parts...) on `loop`'s thread: now when the caller is on it (loop::Access::
// owned_here), else posted (in order per posting thread). A posted call holds the parts (a
// shard's shared objects, all non-null here) by weak reference: once the front let go of
// any of them on that loop (the shard is gone) it does nothing. This is a weak_ptr and not
// an Alive token (loop/alive.h) because it is made on another thread.
template <class F, class... Parts>
void run_on_loop(EventLoop& loop, F f, const std::shared_ptr<Parts>&... parts) {
  if (loop::Access::owned_here(loop)) return f(*parts...);
  loop.post([f = std::move(f), ... weak = std::weak_ptr<Parts>(parts)]() mutable {
    [&f](const std::shared_ptr<Parts>&... held) {
      if ((held && ...)) f(*held...);
    }(weak.lock()...);
  });
}

// Runs `f` on `loop`'s thread and returns when it has run: at once when called there,
// else handed to that loop while the caller blocks (the loop must be running, or this
// waits for ever; after LoopThreads::stop() joined its thread, Debug builds abort instead,
// and release builds log it and run `f` here). A caller that is itself a loop's thread may block
// here while that loop's thread blocks here too, waiting for the caller's loop (two messengers over
// the same loops, or each over the other's, destroyed at once): a blocked thread therefore also
// runs what others wait on its own loop to run, so such waits never form a cycle. `f` then runs
// inside whatever callback the blocked thread was in, as it would if that thread had called
// wait_on_loop for its own loop. front_sync.cc.
void wait_on_loop(EventLoop& loop, const std::function<void()>& f);

// A callback that, called `n` times (from any threads), runs `done` on the last call, on
// that caller's thread. `n` must not be 0.
inline std::function<void()> after_all(std::size_t n, std::function<void()> done) {
  struct Countdown {
    std::atomic<std::size_t> left;
    std::function<void()> done;
  };
  auto c = std::make_shared<Countdown>();
  c->left.store(n);
  c->done = std::move(done);
  return [c] {
    if (c->left.fetch_sub(1, std::memory_order_acq_rel) == 1 && c->done) c->done();
  };
}

}  // namespace rmsg::msg
