#include "rmsg/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "loop/loop_stats.h"
#include "loop/loop_thread.h"
#include "loop/poll_set.h"
#include "loop/timer_heap.h"
#include "rmsg/log.h"

namespace rmsg {
namespace {

constexpr std::uint64_t kWakeKey = ~0ull;
constexpr std::uint64_t kTimerKey = ~0ull - 1;
constexpr int kMaxEvents = 64;
// Iterations in a row whose pollers found work may skip epoll_wait; then one looks, so
// that the loop's other fds (sockets, the timerfd) are never starved by busy pollers.
constexpr int kMaxEpollSkips = 16;
// Busy mode: the longest stretch of empty polling before the loop looks at its fds and
// timers (busy_pass): what a socket's event or a due timer may wait in busy mode.
constexpr auto kBusyLook = std::chrono::microseconds(20);

std::uint32_t to_epoll(std::uint32_t interest) {
  return ((interest & kReadable) ? EPOLLIN | EPOLLRDHUP : 0u) |
         ((interest & kWritable) ? EPOLLOUT : 0u);
}

std::uint32_t from_epoll(std::uint32_t ev) {
  std::uint32_t out = 0;
  if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLPRI)) out |= kReadable;
  if (ev & EPOLLOUT) out |= kWritable;
  // An error or hang-up is reported to both directions, so that whichever side the
  // owner watches learns about it.
  if (ev & (EPOLLERR | EPOLLHUP)) out |= kIoError | kReadable | kWritable;
  return out;
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

class EventLoop::Impl {
 public:
  Impl(Fd ep, Fd wake, Fd timer, const EventLoopOptions& options)
      : ep_(std::move(ep)),
        wake_(std::move(wake)),
        timer_(std::move(timer)),
        manual_(options.clock),
        random_(options.seed ? *options.seed : random_seed()),
        stats_(options.callback_cpu_time),
        polls_(stats_.mutable_set(), options.spin_yield),
        poll_spin_(manual_ ? Duration::zero() : options.poll_spin) {}

  struct Watcher {
    int fd;
    std::uint32_t interest;
    std::shared_ptr<IoCallback> callback;
  };

  Fd ep_, wake_, timer_;
  // The thread that last ran the loop; none (a default id) until it first runs and again
  // from ~EventLoop on: then every thread counts as the loop's (loop_thread.h). Stored with
  // release and read with acquire: a thread that finds itself the owner (or none) sees what
  // the previous owner did before it let go.
  std::atomic<std::thread::id> owner_{};
  // LoopThreads::stop() joined the thread running it; whoever runs it next clears this.
  std::atomic<bool> orphaned_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> wake_signalled_{false};
  bool busy_poll_ = false;
  // run() or run_until() drives the loop: it comes back for deferred work by itself, so
  // nothing needs the eventfd to keep fd() readable (that is for embedding loops).
  bool driving_ = false;
  bool in_iteration_ = false;
  const std::shared_ptr<ManualClock> manual_;  // null: steady_clock
  Random random_;
  loop::LoopStats stats_;
  loop::PollSet polls_;
  const Duration poll_spin_;  // zero: no spinning (off, or a manual clock)
  bool spin_next_ = false;    // the last iteration ran work: the next one spins first
  int epoll_skips_ = 0;       // iterations in a row that skipped epoll_wait

  std::uint64_t next_id_ = 1;
  std::unordered_map<WatchId, Watcher> watchers_;
  loop::TimerHeap timers_;
  Clock::time_point armed_{Clock::time_point::max()};
  std::vector<Task> deferred_;
  std::vector<Task> deferred_spare_;  // run_deferred's batch storage, kept between iterations
  bool deferred_running_ = false;
  std::map<std::uint64_t, Task> destroy_hooks_;
  std::vector<std::pair<const void*, std::shared_ptr<void>>> services_;  // oldest first

  std::mutex post_mu_;
  std::vector<Task> posted_;

  static std::uint64_t random_seed() {
    std::random_device rd;
    return (std::uint64_t{rd()} << 32) ^ rd();
  }

  Clock::time_point now() const noexcept { return manual_ ? manual_->now() : Clock::now(); }

  // Whoever runs the loop owns it from then on (run, run_once, run_until).
  void take_ownership() noexcept {
    owner_.store(std::this_thread::get_id(), std::memory_order_release);
    orphaned_.store(false, std::memory_order_relaxed);
  }

  void signal() {
    if (!wake_signalled_.exchange(true, std::memory_order_acq_rel)) {
      const std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
    }
  }

  void drain_wake() {
    std::uint64_t v;
    [[maybe_unused]] auto n = ::read(wake_.get(), &v, sizeof v);
    wake_signalled_.store(false, std::memory_order_release);
  }

  // Keeps the timerfd armed at the earliest live deadline, so that fd() (and so an
  // embedding loop) wakes for timers with nanosecond precision. Not with a manual clock:
  // the kernel cannot wait for its time.
  void rearm_timerfd() {
    if (manual_) return;
    const auto next = timers_.next();
    if (next == armed_) return;
    armed_ = next;
    itimerspec spec{};
    if (next != Clock::time_point::max()) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(next.time_since_epoch());
      spec.it_value.tv_sec = ns.count() / 1'000'000'000;
      spec.it_value.tv_nsec = ns.count() % 1'000'000'000;
      if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
    }
    if (::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr) < 0) {
      // An embedding loop would never wake for this timer: say so (once per loop, as the
      // next rearm fails the same way), and try again at the next rearm.
      if (!timerfd_failed_) {
        RMSG_LOG(error, "loop: timerfd_settime: %s; timers wait for other events",
                 errno_code(errno).message().c_str());
      }
      timerfd_failed_ = true;
      armed_ = Clock::time_point::min();
    }
  }
  bool timerfd_failed_ = false;

  TimerId add_timer(Duration delay, Duration period, Task task) {
    const TimerId id = next_id_++;
    const auto deadline = now() + delay;
    timers_.add(id, deadline, period, std::move(task));
    if (deadline < armed_) rearm_timerfd();
    return id;
  }

  // Reads the clock only when there is a timer (a clock read is most of an idle poll).
  bool timers_due() {
    const auto next = timers_.next();
    return next != Clock::time_point::max() && next <= now();
  }
  // timers_due() after the iteration's dispatch time started: that reading of the same
  // clock (steady_clock is CLOCK_MONOTONIC) stands for now, so an iteration whose pollers
  // found a message reads the clock once before its callbacks answer it, not twice. A
  // timer that fell due since is found by the next iteration (its timeout is then 0).
  bool timers_due_after_dispatch_start() {
    const std::uint64_t ns = stats_.dispatch_start_ns();
    if (manual_ || ns == 0) return timers_due();
    const auto next = timers_.next();
    return next != Clock::time_point::max() &&
           next <= Clock::time_point(std::chrono::nanoseconds(ns));
  }

  int fire_timers() {
    int ran = 0;
    const auto at = now();
    while (auto task = timers_.pop_due(at)) {
      stats_.timer_fired();
      stats_.run(*task);
      ++ran;
    }
    rearm_timerfd();
    return ran;
  }

  int run_posted() {
    std::vector<Task> batch;
    {
      std::lock_guard lock(post_mu_);
      batch.swap(posted_);
    }
    stats_.posted(batch.size());
    for (auto& t : batch) stats_.run(t);
    return static_cast<int>(batch.size());
  }

  // The batch's storage is kept for the next iteration (a fresh vector per iteration was a
  // malloc and a free per readiness notification); an iteration nested in a task (one
  // that runs the loop itself) uses a vector of its own.
  int run_deferred() {
    if (deferred_.empty()) return 0;
    std::vector<Task> batch;
    const bool own = !deferred_running_;
    if (own) {
      batch.swap(deferred_spare_);
      deferred_running_ = true;
    }
    batch.swap(deferred_);
    for (auto& t : batch) stats_.run(t);
    const int n = static_cast<int>(batch.size());
    if (own) {
      batch.clear();
      deferred_spare_.swap(batch);
      deferred_running_ = false;
    }
    return n;
  }

  // Busy mode: polls until a pass finds work, a post or stop() is pending, or
  // kBusyLook of empty polling has passed (or a timer is due); only then does the
  // iteration look at epoll. The clock is read every PollSet::kCheckEvery empty passes.
  // An epoll_wait(0) is a system call (microseconds in a TCG guest), and a completion
  // landing during it waits for it: looking after every few passes cost the busy ping-pong
  // a system call per message on each side.
  // The stretch's end is computed at the first check, so a pass that finds work at once
  // (the busy loop's common case under traffic) reads no clock and no timer.
  int busy_pass() {
    Clock::time_point look{};
    for (std::uint32_t i = 1;; ++i) {
      if (const int found = polls_.poll_all(); found > 0) return found;
      if (wake_signalled_.load(std::memory_order_acquire)) return 0;
      if (i % loop::PollSet::kCheckEvery != 0) continue;
      if (manual_) return 0;
      const auto now = Clock::now();
      if (i == loop::PollSet::kCheckEvery) look = std::min(now + kBusyLook, timers_.next());
      if (now >= look) return 0;
    }
  }

  // The pollers before the wait (poll_set.h): busy mode polls once; after work, a spin
  // polls until the budget is spent; a loop about to wait arms them and polls once more.
  // Returns how many pollers found work: then the iteration need not wait at all.
  int poll_phase(Duration timeout) {
    if (polls_.empty()) return 0;
    if (busy_poll_) return stats_.poll_pass([&] { return busy_pass(); });
    int found = 0;
    if (spin_next_ && poll_spin_ > Duration::zero() && timeout != Duration::zero() &&
        deferred_.empty()) {
      auto limit = Clock::now() + poll_spin_;
      limit = std::min(limit, timers_.next());
      if (timeout > Duration::zero()) limit = std::min(limit, Clock::now() + timeout);
      found = stats_.poll_pass([&] { return polls_.spin(limit, wake_signalled_); });
    }
    // Arm only before a wait, or when an embedding loop may sleep on fd() next.
    if (found == 0 && (wait_ms(timeout) != 0 || !driving_)) {
      found = stats_.poll_pass([&] { return polls_.arm_all(); });
    }
    return found;
  }

  int wait_ms(Duration timeout) {
    if (!deferred_.empty() || busy_poll_) return 0;
    if (manual_ && timers_due()) return 0;
    if (timeout < Duration::zero()) return -1;
    // Round up so that a short timeout does not turn into a busy spin.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
    return ms > 1'000'000 ? 1'000'000 : static_cast<int>(ms);
  }

  // One iteration, by whoever owns the loop now (the entry points record the owner once:
  // std::this_thread::get_id() is a call into libc per iteration otherwise).
  Result<int> iterate(Duration timeout) {
    stats_.begin_iteration();
    in_iteration_ = true;
    const int found = poll_phase(timeout);
    int ran = found;
    epoll_event events[kMaxEvents];
    // Work found by the pollers is dispatched without a look at epoll (a system call), up
    // to kMaxEpollSkips iterations in a row, and unless a post or stop() is pending.
    const bool skip = found > 0 && epoll_skips_ < kMaxEpollSkips &&
                      !wake_signalled_.load(std::memory_order_acquire);
    epoll_skips_ = skip ? epoll_skips_ + 1 : 0;
    stats_.epoll_called(!skip);
    const int n =
        skip ? 0 : ::epoll_wait(ep_.get(), events, kMaxEvents, found > 0 ? 0 : wait_ms(timeout));
    if (n < 0 && errno != EINTR) {
      in_iteration_ = false;
      return errno_code(errno);
    }
    stats_.woke(n);
    bool timerfd_fired = false;
    bool woken = false;
    for (int i = 0; i < n; ++i) {
      const std::uint64_t key = events[i].data.u64;
      if (key == kWakeKey) {
        woken = true;
        continue;
      }
      if (key == kTimerKey) {
        std::uint64_t expirations;
        [[maybe_unused]] auto r = ::read(timer_.get(), &expirations, sizeof expirations);
        armed_ = Clock::time_point::max();  // fired: disarmed until rearm_timerfd()
        timerfd_fired = true;
        continue;
      }
      auto it = watchers_.find(key);
      if (it == watchers_.end()) continue;  // removed earlier in this batch
      const std::uint32_t ev = from_epoll(events[i].events) & (it->second.interest | kIoError);
      if (ev == 0) continue;
      auto cb = it->second.callback;  // alive even if the callback unwatches itself
      stats_.run([&] { (*cb)(ev); });
      ++ran;
    }
    if (woken) {
      stats_.eventfd_woke();
      drain_wake();
      ran += run_posted();
    }
    if (timerfd_fired || timers_due_after_dispatch_start()) ran += fire_timers();
    ran += run_deferred();
    spin_next_ = ran > 0;
    in_iteration_ = false;
    // Keeps fd() readable for an embedding loop, which has to come back for deferred
    // work and for pollers that found work (they are not armed).
    if (!driving_ && (!deferred_.empty() || found > 0 || (manual_ && timers_due()))) signal();
    stats_.end_iteration();
    return ran;
  }

  // Marks the loop driven by run()/run_until() for a scope; on leaving, an embedding loop
  // that takes over must still see pending deferred work through fd().
  class Driving {
   public:
    explicit Driving(Impl& impl) : impl_(impl), was_(std::exchange(impl.driving_, true)) {}
    Driving(const Driving&) = delete;
    Driving& operator=(const Driving&) = delete;
    Driving(Driving&&) = delete;
    Driving& operator=(Driving&&) = delete;
    ~Driving() {
      impl_.driving_ = was_;
      if (!was_ && !impl_.deferred_.empty()) impl_.signal();
    }

   private:
    Impl& impl_;
    const bool was_;
  };
};

Result<std::unique_ptr<EventLoop>> EventLoop::create() {
  return create(EventLoopOptions{});
}

Result<std::unique_ptr<EventLoop>> EventLoop::create(const EventLoopOptions& options) {
  Fd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (ep.get() < 0) return errno_code(errno);
  Fd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake.get() < 0) return errno_code(errno);
  Fd timer(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (timer.get() < 0) return errno_code(errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeKey;
  if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, wake.get(), &ev) < 0) return errno_code(errno);
  ev.data.u64 = kTimerKey;
  if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, timer.get(), &ev) < 0) return errno_code(errno);
  auto impl = std::make_unique<Impl>(std::move(ep), std::move(wake), std::move(timer), options);
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(impl)));
}

EventLoop::EventLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EventLoop::~EventLoop() {
  impl_->owner_.store(std::thread::id{}, std::memory_order_release);
  // Newest first; a hook may add or remove hooks and use every other method.
  auto& hooks = impl_->destroy_hooks_;
  while (!hooks.empty()) {
    auto it = std::prev(hooks.end());
    auto task = std::make_shared<Task>(std::move(it->second));
    hooks.erase(it);
    if (*task) (*task)();
  }
  // Newest first, one at a time: a service's destructor may still use the loop (unwatch
  // its fd) and look up an older service.
  auto& services = impl_->services_;
  while (!services.empty()) {
    auto doomed = std::move(services.back().second);
    services.pop_back();
    doomed.reset();
  }
}

std::shared_ptr<void> EventLoop::service(const void* key) const {
  RMSG_ASSERT_LOOP_THREAD(*this);
  for (const auto& [k, svc] : impl_->services_) {
    if (k == key) return svc;
  }
  return nullptr;
}

void EventLoop::set_service(const void* key, std::shared_ptr<void> service) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  auto& services = impl_->services_;
  for (auto it = services.begin(); it != services.end(); ++it) {
    if (it->first == key) {
      auto old = std::move(it->second);  // destroyed after the map is consistent again
      services.erase(it);
      break;
    }
  }
  if (service) services.emplace_back(key, std::move(service));
}

std::uint64_t EventLoop::add_destroy_hook(Task task) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  const std::uint64_t id = impl_->next_id_++;
  impl_->destroy_hooks_.emplace(id, std::move(task));
  return id;
}

void EventLoop::remove_destroy_hook(std::uint64_t id) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  impl_->destroy_hooks_.erase(id);
}

Result<WatchId> EventLoop::watch(int fd, std::uint32_t interest, IoCallback callback) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  const WatchId id = impl_->next_id_++;
  epoll_event ev{};
  ev.events = to_epoll(interest);
  ev.data.u64 = id;
  if (::epoll_ctl(impl_->ep_.get(), EPOLL_CTL_ADD, fd, &ev) < 0) return errno_code(errno);
  impl_->watchers_.emplace(
      id, Impl::Watcher{fd, interest, std::make_shared<IoCallback>(std::move(callback))});
  return id;
}

Result<void> EventLoop::set_interest(WatchId id, std::uint32_t interest) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  auto it = impl_->watchers_.find(id);
  if (it == impl_->watchers_.end()) return Errc::invalid_argument;
  if (it->second.interest == interest) return {};
  epoll_event ev{};
  ev.events = to_epoll(interest);
  ev.data.u64 = id;
  if (::epoll_ctl(impl_->ep_.get(), EPOLL_CTL_MOD, it->second.fd, &ev) < 0) {
    return errno_code(errno);
  }
  it->second.interest = interest;
  return {};
}

void EventLoop::unwatch(WatchId id) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  auto it = impl_->watchers_.find(id);
  if (it == impl_->watchers_.end()) return;
  // EBADF/ENOENT are fine here: the owner may already have closed the fd.
  ::epoll_ctl(impl_->ep_.get(), EPOLL_CTL_DEL, it->second.fd, nullptr);
  impl_->watchers_.erase(it);
}

TimerId EventLoop::add_timer(Duration delay, Task task) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  return impl_->add_timer(delay, Duration::zero(), std::move(task));
}

TimerId EventLoop::add_periodic(Duration period, Task task) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  if (period <= Duration::zero()) period = Duration(1);
  return impl_->add_timer(period, period, std::move(task));
}

bool EventLoop::cancel_timer(TimerId id) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  return impl_->timers_.cancel(id);
}

void EventLoop::defer(Task task) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  impl_->deferred_.push_back(std::move(task));
  // Inside an iteration, or while run()/run_until() drive the loop, the loop comes back
  // for it without being woken: no eventfd write (and no read of it back).
  if (!impl_->in_iteration_ && !impl_->driving_) impl_->signal();
}

void EventLoop::post(Task task) {
  {
    std::lock_guard lock(impl_->post_mu_);
    impl_->posted_.push_back(std::move(task));
  }
  impl_->signal();
}

Result<void> EventLoop::run() {
  const Impl::Driving driving(*impl_);
  impl_->take_ownership();
  // exchange: each stop() ends exactly one run(), also when it came before run() started.
  while (!impl_->stop_.exchange(false, std::memory_order_acq_rel)) {
    auto r = impl_->iterate(Duration(-1));
    if (!r) return r.error();
  }
  return {};
}

void EventLoop::stop() {
  impl_->stop_.store(true, std::memory_order_release);
  impl_->signal();
}

Result<int> EventLoop::run_once(Duration timeout) {
  impl_->take_ownership();
  return impl_->iterate(timeout);
}

bool EventLoop::run_until(const std::function<bool()>& done, Clock::time_point deadline) {
  // Whoever runs the loop owns it from here (its guard timer below is loop-thread-only).
  impl_->take_ownership();
  if (done()) return true;
  const Impl::Driving driving(*impl_);
  // One loop timer for the deadline instead of a timeout on every epoll_wait: a timed
  // epoll_wait arms a kernel timer per sleep, which costs about a microsecond a wakeup.
  const auto now = impl_->now();
  bool expired = now >= deadline;
  // A far deadline (time_point::max() included) means no guard timer: deadline - now
  // would overflow.
  const bool far = deadline > now + std::chrono::hours(24 * 365);
  const TimerId guard = far ? 0 : add_timer(deadline - now, [&expired] { expired = true; });
  const auto& manual = impl_->manual_;
  while (!done() && !expired) {
    // Virtual time: poll, and skip to the next timer (the guard at the latest) when idle.
    // With no timer at all there is nothing to skip to: wait for I/O and posts.
    const bool skip = manual && impl_->timers_.next() != Clock::time_point::max();
    auto ran = impl_->iterate(skip ? Duration::zero() : Duration(-1));
    if (!ran) break;
    if (skip && ran.value() == 0) manual->advance_to(impl_->timers_.next());
  }
  if (guard != 0) cancel_timer(guard);
  return done();
}

Clock::time_point EventLoop::now() const noexcept {
  return impl_->now();
}

Random& EventLoop::random() noexcept {
  RMSG_ASSERT_LOOP_THREAD(*this);
  return impl_->random_;
}

const CounterSet& EventLoop::counters() const noexcept {
  return impl_->stats_.set();
}

void EventLoop::set_busy_poll(bool on) noexcept {
  RMSG_ASSERT_LOOP_THREAD(*this);
  impl_->busy_poll_ = on;
}
bool EventLoop::busy_poll() const noexcept {
  return impl_->busy_poll_;
}

std::uint64_t EventLoop::add_poller(std::function<bool()> poll, std::function<bool()> arm) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  const auto id = impl_->next_id_++;
  impl_->polls_.add(id, std::move(poll), std::move(arm));
  return id;
}

void EventLoop::remove_poller(std::uint64_t id) {
  RMSG_ASSERT_LOOP_THREAD(*this);
  impl_->polls_.remove(id);
}

int EventLoop::fd() const noexcept {
  return impl_->ep_.get();
}

bool EventLoop::in_loop_thread() const noexcept {
  const auto owner = impl_->owner_.load(std::memory_order_acquire);
  return owner == std::thread::id{} || owner == std::this_thread::get_id();
}

namespace loop {

bool Access::owned_here(const EventLoop& loop) noexcept {
  const auto me = std::this_thread::get_id();
  auto owner = loop.impl_->owner_.load(std::memory_order_acquire);
  if (owner == me) return true;
  if (owner != std::thread::id{}) return false;
  return loop.impl_->owner_.compare_exchange_strong(owner, me, std::memory_order_acq_rel);
}

void Access::mark_orphaned(EventLoop& loop) noexcept {
  loop.impl_->orphaned_.store(true, std::memory_order_release);
}

bool Access::orphaned(const EventLoop& loop) noexcept {
  return loop.impl_->orphaned_.load(std::memory_order_acquire) && !loop.in_loop_thread();
}

}  // namespace loop

}  // namespace rmsg
