// LoopThreads: N EventLoops, each run by a thread of its own. The library starts no thread
// by itself; this helper is how an application that wants loops on threads asks for them
// (a Messenger over several loops, rmsg/messenger.h, is the intended user).
//
// Life: create() makes the loops; objects for them (a Messenger, streams) are made next,
// on the creating thread, before start() runs each loop on its thread (loop-thread-only
// setup is allowed before a loop first runs). stop() stops and joins them; afterwards
// the creating thread may use the loops again (run_once makes it their thread). Destroy
// what lives on the loops while they run (a Messenger's destructor hands its shutdown to
// each loop and waits), then the LoopThreads.
//
// Threading: create, start, stop and the destructor: one thread (the owner). loops(),
// loop() and size(): any thread. run_sync(): any thread but a loop thread of this set.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "rmsg/event_loop.h"
#include "rmsg/export.h"
#include "rmsg/result.h"

namespace rmsg {

// Restricts the calling thread to CPU `cpu`. Pinning a loop's thread keeps its data path
// on one CPU: on Soft-RoCE the send side's protocol work runs in the posting thread's
// system call, so a loop thread the scheduler moves takes that work to another CPU with
// it (docs/perf.md, "Thread placement"). Errors: Errc::invalid_argument for a CPU the
// machine does not have, one that is offline or one outside the process's cpuset.
RMSG_EXPORT Result<void> pin_this_thread(int cpu);

class RMSG_EXPORT LoopThreads {
 public:
  // `options` for every loop; a given seed becomes seed + i for loop i. `cpus`: loop i's
  // thread runs on CPU cpus[i % cpus.size()] only (pin_this_thread, when start() runs
  // it; a thread the kernel will not pin there logs a warning and runs unpinned); empty:
  // wherever the scheduler puts it. Errors: those of EventLoop::create;
  // Errc::invalid_argument for n == 0 or a CPU the machine does not have.
  static Result<std::unique_ptr<LoopThreads>> create(std::size_t n,
                                                     const EventLoopOptions& options = {},
                                                     std::span<const int> cpus = {});
  LoopThreads(const LoopThreads&) = delete;
  LoopThreads& operator=(const LoopThreads&) = delete;
  LoopThreads(LoopThreads&&) = delete;
  LoopThreads& operator=(LoopThreads&&) = delete;
  // stop(), then the loops are destroyed.
  ~LoopThreads();

  // Starts one thread per loop, pinned when create() was given CPUs, running
  // EventLoop::run() until stop(), and returns once each loop runs on its thread (from then
  // on, every other thread is foreign to it).
  void start();
  // Stops every loop and joins its thread; idempotent.
  void stop();

  std::span<EventLoop* const> loops() const noexcept { return raw_; }
  EventLoop& loop(std::size_t i) const noexcept { return *raw_[i]; }
  std::size_t size() const noexcept { return raw_.size(); }

  // Runs `f` on loop i's thread (posted) and waits for it to return; runs it right here
  // when the loops are not started. For set-up and inspection from outside.
  void run_sync(std::size_t i, const std::function<void()>& f);

 private:
  LoopThreads() = default;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<EventLoop*> raw_;
  std::vector<std::thread> threads_;
  std::vector<int> cpus_;  // per loop: the CPU its thread is pinned to, or -1
  bool started_ = false;
};

}  // namespace rmsg
