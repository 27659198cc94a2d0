// RMSG_ASSERT_LOOP_THREAD(loop): Debug builds (NDEBUG unset: the ASan and TSan trees) abort
// with a message when a loop-thread-only entry point runs on a thread other than the one
// running `loop` (an EventLoop&); release builds compile it out entirely.
//
// It passes on the thread that last ran the loop and on any thread while the loop has not
// run yet (EventLoop::in_loop_thread()), so objects made for a loop before it first runs
// on another thread pass, one thread at a time. ~EventLoop returns the loop to "not
// running" before its destroy hooks and services run, since a loop is destroyed once its
// thread is done with it. A violation is a bug in the caller, never a peer's doing, hence
// an abort rather than an error value.
#pragma once

#include "rmsg/event_loop.h"

namespace rmsg::loop {

// What the library's own layers ask about a loop's thread beyond the public
// in_loop_thread() (event_loop.cc). Thread-safe.
struct Access {
  // For routing a call from any thread ("call directly or post"): true on the thread that
  // runs the loop (or ran it last); on a loop that no thread ran yet, true for the first
  // thread that asks, which owns it from then until a thread runs it, and false for every
  // other (their calls are posted and run when the loop does). in_loop_thread() says yes
  // to every thread then, so two threads would both go straight in.
  static bool owned_here(const EventLoop& loop) noexcept;
  // LoopThreads::stop() joined the thread that ran `loop`: nothing runs it until a thread
  // runs it again (which clears this).
  static void mark_orphaned(EventLoop& loop) noexcept;
  // Marked so, and the calling thread is not the loop's: a wait for the loop to run
  // something would never end.
  static bool orphaned(const EventLoop& loop) noexcept;
};

[[noreturn]] void loop_thread_violation(const char* function, const char* file, int line) noexcept;

inline void check_loop_thread(const EventLoop& loop, const char* function, const char* file,
                              int line) noexcept {
  if (!loop.in_loop_thread()) [[unlikely]]
    loop_thread_violation(function, file, line);
}

}  // namespace rmsg::loop

#ifdef NDEBUG
#define RMSG_ASSERT_LOOP_THREAD(event_loop) static_cast<void>(0)
#else
#define RMSG_ASSERT_LOOP_THREAD(event_loop) \
  ::rmsg::loop::check_loop_thread((event_loop), __func__, __FILE__, __LINE__)
#endif
