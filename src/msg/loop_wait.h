// wait_on_loop: runs `f` on `loop`'s thread and returns when it has run - at once when
// called there; else posted, and the caller blocks until the loop has run it. For the
// fronts' teardown (Messenger::Front, RpcEndpoint::Front): the loop must be running, or
// this waits for ever.
//
// Threading: any thread.
#pragma once

#include <functional>
#include <future>

#include "rmsg/event_loop.h"

namespace rmsg::msg {

inline void wait_on_loop(EventLoop& loop, const std::function<void()>& f) {
  if (loop.in_loop_thread()) return f();
  std::promise<void> done;
  auto ready = done.get_future();
  loop.post([&f, &done] {
    f();
    done.set_value();
  });
  ready.wait();
}

}  // namespace rmsg::msg
