// EventLoop: an epoll reactor with fd watchers, monotonic timers, deferred tasks and a
// thread-safe post() queue woken through an eventfd.
//
// Threading: one loop per thread. Every method is loop-thread-only (the thread that calls
// run()/run_once(); before the loop first runs, any one thread at a time) EXCEPT post(),
// stop(), now(), counters() and fd(), which any thread may call. Debug builds abort a
// loop-thread-only call from another thread (src/loop/loop_thread.h). Callbacks run on
// the loop thread, one at a time; a callback may call any loop method, including removing
// its own watcher or cancelling its own timer.
//
// Embedding: fd() is an epoll fd that becomes readable whenever run_once(0) has work to
// do; an application's own loop (libuv, asio, plain epoll) watches it and calls
// run_once(0) when it fires.
//
// Time: the loop reads one clock (now()) for its timers and for run_until()/run_for()
// deadlines: steady_clock, or a ManualClock given at create() (rmsg/loop_time.h). Layers
// above compute their deadlines and elapsed times from now(), never from Clock::now(), so
// that a manual clock drives them too. random() is the loop's seeded pseudo-random source.
//
// Ordering guarantees:
//   - timers fire in deadline order; timers with equal deadlines fire in the order they
//     were added;
//   - deferred tasks run in the order they were deferred, after the I/O and timers of the
//     current iteration; posted tasks run in the order they were posted.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "rmsg/counters.h"
#include "rmsg/export.h"
#include "rmsg/loop_time.h"
#include "rmsg/result.h"

namespace rmsg {

namespace loop {
struct Access;  // the library's own questions about a loop's thread (not installed)
}  // namespace loop

// Bits of a watcher's interest and of the events its callback receives (flag constants,
// hence kCamel like other constants rather than an enum's lower_case).
// NOLINTBEGIN(readability-identifier-naming)
enum IoEvent : std::uint32_t {
  kReadable = 1u << 0,
  kWritable = 1u << 1,
  kIoError = 1u << 2,  // delivered only: EPOLLERR / EPOLLHUP (with kReadable|kWritable set)
};
// NOLINTEND(readability-identifier-naming)

using WatchId = std::uint64_t;  // 0 is never a valid id
using TimerId = std::uint64_t;  // 0 is never a valid id
using Task = std::function<void()>;
using IoCallback = std::function<void(std::uint32_t events)>;

struct RMSG_EXPORT EventLoopOptions {
  // Null: steady_clock, and the loop sleeps until its next timer in the kernel (timerfd).
  // A manual clock makes time virtual: the loop never sleeps for a timer (its timerfd stays
  // disarmed); run_once() polls without waiting while a timer is due on the clock, and
  // otherwise waits only for I/O, posts and the caller's real-time timeout; run_until()
  // skips idle time (see there). fd() becomes readable for due timers only at the end of
  // an iteration: an embedding loop calls run_once(0) itself after advancing the clock.
  std::shared_ptr<ManualClock> clock;
  // The seed of random(). Unset: one from std::random_device (differs per loop and run).
  std::optional<std::uint64_t> seed;
  // Measure each callback's thread CPU time (loop.callback_cpu_ns below). Off by default:
  // it costs one clock_gettime(CLOCK_THREAD_CPUTIME_ID) per callback plus one per busy
  // iteration, a system call (0.5-0.6 us each measured on a KVM guest, against 0.05 us
  // for CLOCK_MONOTONIC), which would double the cost of a one-callback iteration.
  bool callback_cpu_time = false;
  // Adaptive polling of the pollers (add_poller; RDMA streams register their CQs): after
  // an iteration that ran work, the next one polls them for up to poll_spin before it
  // arms them and sleeps, so that a reply arriving within that time costs no wakeup (no
  // interrupt, no epoll_wait, no completion-channel read). Zero turns spinning off
  // (pollers are then armed and polled once before every wait). Ignored with a manual
  // clock. While it spins, the loop's fds and timers wait, at most poll_spin.
  Duration poll_spin = std::chrono::microseconds(50);
  // A spin calls sched_yield every PollSet::kCheckEvery (16) empty passes, when it also
  // reads the clock: on a machine with fewer CPUs than runnable threads (a small VM) the
  // spinning thread must not hold off the kernel work it waits for (Soft-RoCE runs the
  // peer's transport there).
  bool spin_yield = true;
};

class RMSG_EXPORT EventLoop {
 public:
  // Creates the epoll fd, the wakeup eventfd and the timerfd. Fails with the errno of
  // epoll_create1 / eventfd / timerfd_create (EMFILE, ENFILE, ENOMEM).
  static Result<std::unique_ptr<EventLoop>> create();
  static Result<std::unique_ptr<EventLoop>> create(const EventLoopOptions& options);

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  EventLoop(EventLoop&&) = delete;
  EventLoop& operator=(EventLoop&&) = delete;
  // Runs the destroy hooks (add_destroy_hook), then closes the fds. Watched fds are not
  // closed (the loop does not own them); pending tasks and timers are dropped unrun.
  ~EventLoop();

  // Watches fd (level-triggered) for `interest` (kReadable|kWritable). The fd must stay
  // open until unwatch(). Errors: EEXIST (fd already watched), EBADF, EPERM (a regular
  // file), ENOMEM, ENOSPC.
  Result<WatchId> watch(int fd, std::uint32_t interest, IoCallback callback);
  // Changes the interest of a watcher (0 = keep watching but report nothing).
  Result<void> set_interest(WatchId id, std::uint32_t interest);
  // Stops watching; safe inside the watcher's own callback and for unknown ids. Events
  // already collected for this watcher in the current iteration are dropped.
  void unwatch(WatchId id);

  // A one-shot timer that fires once the loop's clock reaches now() + `delay`.
  TimerId add_timer(Duration delay, Task task);
  // A periodic timer: first fires after `period`, then every `period` (no catch-up burst:
  // a late tick is rescheduled from the time it ran).
  TimerId add_periodic(Duration period, Task task);
  // Cancels a timer; true if it was pending. Safe inside any callback, including the
  // timer's own (a periodic timer cancelled in its callback does not fire again).
  bool cancel_timer(TimerId id);

  // Runs `task` on this loop after the current iteration's I/O and timers. Costs no
  // system call when called inside an iteration or while run()/run_until() drive the
  // loop; otherwise it writes the wake eventfd, so that fd() becomes readable.
  void defer(Task task);
  // Thread-safe: queues `task` and wakes the loop. Returns false once the loop is gone
  // is not detectable here: the caller must keep the loop alive while posting.
  void post(Task task);

  // Runs until stop(). Returns the first epoll_wait error other than EINTR, if any.
  Result<void> run();
  // Thread-safe: makes run() return after the current iteration; also wakes run_once.
  // A stop() that comes while run() is not running makes the next run() return at once.
  void stop();
  // One iteration: waits up to `timeout` (0 = poll without sleeping; negative = no limit)
  // for I/O or the next timer, then dispatches. Returns the number of callbacks run.
  Result<int> run_once(Duration timeout);
  // Runs iterations until `done()` is true or now() reaches `deadline` (the loop's
  // clock); true if done() held. Intended for tests and tools: nothing sleeps longer than
  // until the deadline. With a manual clock, an iteration that runs nothing advances the
  // clock to the next timer (at the latest to the deadline) instead of sleeping: timers,
  // deferred and posted work play out without real waiting, but I/O that has not arrived
  // when the loop polls does not hold time back (step with run_once(timeout) for that).
  bool run_until(const std::function<bool()>& done, Clock::time_point deadline);
  bool run_for(const std::function<bool()>& done, Duration limit) {
    return run_until(done, now() + limit);
  }

  // Thread-safe: the loop's time (its clock; steady_clock unless a manual clock was given).
  Clock::time_point now() const noexcept;
  // The loop's pseudo-random source, seeded from EventLoopOptions::seed (random().seed()
  // tells the seed), for the jitter of backoff and similar. Loop-thread-only.
  Random& random() noexcept;

  // Thread-safe: the loop's instrumentation, written by the loop thread as it runs (reads
  // from another thread see each value whole, not one consistent moment across values):
  //   loop.iterations       run_once() calls (run() and run_until() iterate through it)
  //   loop.callbacks        callbacks run: I/O, timers, posted and deferred tasks, and one
  //                         per poller pass (busy, spin, after arming) that found work
  //                         (not CPU-timed)
  //   loop.wakeups          epoll_wait returns with at least one event
  //   loop.eventfd_wakeups  of those, ones where the wake eventfd was set (post(), stop(),
  //                         defer() outside the loop; several posts before the loop
  //                         wakes count once)
  //   loop.posted_tasks     posted tasks run
  //   loop.timers_fired     timer callbacks run (each tick of a periodic timer counts)
  //   loop.epoll_waits      epoll_wait calls (system calls)
  //   loop.epoll_skips      iterations that dispatched pollers' work without epoll_wait
  //   loop.spins            adaptive spins begun (EventLoopOptions::poll_spin)
  //   loop.spin_polls       poller passes made by those spins
  //   loop.yields           sched_yield calls of those spins
  //   loop.arms             pollers armed (their arm() returned true) before a wait
  //   loop.iteration_max_ns the longest loop.iteration_ns recorded (a gauge, not a sum)
  // and histograms (rmsg::Histogram, power-of-two nanosecond buckets):
  //   loop.iteration_ns     per iteration that ran a callback: real time from its first
  //                         callback to the end of the iteration (sleeping excluded)
  //   loop.callback_cpu_ns  per callback but poller passes: thread CPU time
  //                         (CLOCK_THREAD_CPUTIME_ID), the loop's own work since the
  //                         previous callback included; empty when
  //                         EventLoopOptions::callback_cpu_time is off
  const CounterSet& counters() const noexcept;

  // Busy-poll mode: run() never sleeps, and pollers (below) run on every iteration, pass
  // after pass until one finds work, a post() or stop() is pending, a timer is due or
  // 20 us of empty polling have passed; epoll_wait(0) is called only then (and at least
  // every 17th iteration, so that fds are not starved): an fd event or a timer waits at
  // most ~20 us in busy mode. For the lowest latency at the cost of a core.
  void set_busy_poll(bool on) noexcept;
  bool busy_poll() const noexcept;
  // Pollers: work the loop reaps by polling rather than from an fd (RDMA streams poll
  // their CQs). `poll` reaps without blocking and returns true if it found work. `arm`
  // asks for an fd wakeup (one the owner watches) for the next work and returns true if
  // it armed just now, false if it was armed already. The loop polls on every iteration in
  // busy-poll mode, spins after work (EventLoopOptions::poll_spin), and before it waits it
  // calls every `arm` and then `poll` once more for each that returned true (work that
  // landed between the last poll and the arm raised no wakeup); it sleeps only if that
  // found nothing. Without `arm` a poller runs only in busy mode and in spins, and must
  // wake the loop by other means. A poller that found work is not armed: an embedding
  // loop sees fd() readable until run_once(0) finds it idle. Removal is safe from callbacks
  // (a poller removed during a pass is not called again).
  std::uint64_t add_poller(std::function<bool()> poll, std::function<bool()> arm = {});
  void remove_poller(std::uint64_t id);

  // Runs `task` first thing in ~EventLoop, while every method still works (newest hook
  // first). For owners of work that must not outlive the loop, such as a connect in
  // flight. Removal is safe from callbacks and for unknown ids.
  std::uint64_t add_destroy_hook(Task task);
  void remove_destroy_hook(std::uint64_t id);

  // Per-loop services: an object of which a layer keeps one per loop (the rdma_cm event
  // channel; later completion channels), found by `key`, the address of a static object
  // that names the service. service() returns the registered one or null; set_service()
  // registers, replaces (null: removes) it. The loop owns its services and destroys them
  // in ~EventLoop after the destroy hooks, newest first, while every method still works.
  // Loop-thread-only like the rest: objects made for a loop before it first runs may be
  // made on any thread, one thread at a time, and find the same services.
  std::shared_ptr<void> service(const void* key) const;
  void set_service(const void* key, std::shared_ptr<void> service);

  // Thread-safe: the epoll fd, readable when there is work (for embedding).
  int fd() const noexcept;

  // True on the thread that last ran this loop (run(), run_once(), run_until()), and on
  // every thread before the loop first runs and once its destruction began: objects for a
  // loop may be made on any thread before it runs, one thread at a time. Debug builds
  // check loop-thread-only entry points with it.
  bool in_loop_thread() const noexcept;

  class RMSG_HIDDEN Impl;

 private:
  friend struct loop::Access;
  explicit EventLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rmsg
