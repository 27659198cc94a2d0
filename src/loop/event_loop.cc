#include "rmsg/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <vector>

namespace rmsg {
namespace {

constexpr std::uint64_t kWakeKey = ~0ull;
constexpr std::uint64_t kTimerKey = ~0ull - 1;
constexpr int kMaxEvents = 64;

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
  Impl(Fd ep, Fd wake, Fd timer)
      : ep_(std::move(ep)),
        wake_(std::move(wake)),
        timer_(std::move(timer)),
        owner_(std::this_thread::get_id()) {}

  struct Watcher {
    int fd;
    std::uint32_t interest;
    std::shared_ptr<IoCallback> callback;
  };
  struct Timer {
    Clock::time_point deadline;
    Duration period;  // zero for one-shot
    std::uint64_t seq;
    std::shared_ptr<Task> task;
  };
  struct HeapEntry {
    Clock::time_point deadline;
    std::uint64_t seq;  // tie-break: insertion order; also detects stale entries
    TimerId id;
    bool operator>(const HeapEntry& o) const {
      return deadline != o.deadline ? deadline > o.deadline : seq > o.seq;
    }
  };

  Fd ep_, wake_, timer_;
  std::atomic<std::thread::id> owner_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> wake_signalled_{false};
  bool busy_poll_ = false;

  std::uint64_t next_id_ = 1;
  std::unordered_map<WatchId, Watcher> watchers_;
  std::unordered_map<TimerId, Timer> timers_;
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, std::greater<>> heap_;
  Clock::time_point armed_{Clock::time_point::max()};
  std::uint64_t timer_seq_ = 0;
  std::vector<Task> deferred_;
  std::map<std::uint64_t, std::shared_ptr<std::function<bool()>>> pollers_;
  std::map<std::uint64_t, Task> destroy_hooks_;
  std::vector<std::pair<const void*, std::shared_ptr<void>>> services_;  // oldest first

  std::mutex post_mu_;
  std::vector<Task> posted_;

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
  // embedding loop) wakes for timers with nanosecond precision.
  void rearm_timerfd() {
    while (!heap_.empty()) {
      auto it = timers_.find(heap_.top().id);
      if (it != timers_.end() && it->second.seq == heap_.top().seq) break;
      heap_.pop();
    }
    const auto next = heap_.empty() ? Clock::time_point::max() : heap_.top().deadline;
    if (next == armed_) return;
    armed_ = next;
    itimerspec spec{};
    if (next != Clock::time_point::max()) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(next.time_since_epoch());
      spec.it_value.tv_sec = ns.count() / 1'000'000'000;
      spec.it_value.tv_nsec = ns.count() % 1'000'000'000;
      if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
    }
    ::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr);
  }

  TimerId add_timer(Duration delay, Duration period, Task task) {
    const TimerId id = next_id_++;
    const auto deadline = Clock::now() + delay;
    const auto seq = ++timer_seq_;
    timers_.emplace(id, Timer{deadline, period, seq, std::make_shared<Task>(std::move(task))});
    heap_.push({deadline, seq, id});
    if (deadline < armed_) rearm_timerfd();
    return id;
  }

  // Cancelled timers leave their heap entries behind (cancel is O(1)); rebuild the heap
  // when they outnumber the live ones, so that churn cannot grow it without bound.
  void compact_heap() {
    if (heap_.size() < 64 || heap_.size() < 2 * timers_.size()) return;
    std::vector<HeapEntry> live;
    live.reserve(timers_.size());
    for (const auto& [id, t] : timers_) live.push_back({t.deadline, t.seq, id});
    heap_ = decltype(heap_)(std::greater<>(), std::move(live));
  }

  int fire_timers() {
    int ran = 0;
    const auto now = Clock::now();
    while (!heap_.empty() && heap_.top().deadline <= now) {
      const HeapEntry top = heap_.top();
      heap_.pop();
      auto it = timers_.find(top.id);
      if (it == timers_.end() || it->second.seq != top.seq) continue;  // cancelled / stale
      auto task = it->second.task;  // keeps the callable alive if it cancels itself
      if (it->second.period > Duration::zero()) {
        it->second.deadline = now + it->second.period;
        it->second.seq = ++timer_seq_;
        heap_.push({it->second.deadline, it->second.seq, top.id});
      } else {
        timers_.erase(it);
      }
      (*task)();
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
    for (auto& t : batch) t();
    return static_cast<int>(batch.size());
  }

  int run_deferred() {
    std::vector<Task> batch;
    batch.swap(deferred_);
    for (auto& t : batch) t();
    return static_cast<int>(batch.size());
  }

  int run_pollers() {
    int found = 0;
    std::vector<std::shared_ptr<std::function<bool()>>> snapshot;
    snapshot.reserve(pollers_.size());
    for (auto& [id, p] : pollers_) snapshot.push_back(p);
    for (auto& p : snapshot) found += (*p)() ? 1 : 0;
    return found;
  }

  int wait_ms(Duration timeout) const {
    if (!deferred_.empty() || busy_poll_) return 0;
    if (timeout < Duration::zero()) return -1;
    // Round up so that a short timeout does not turn into a busy spin.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
    return ms > 1'000'000 ? 1'000'000 : static_cast<int>(ms);
  }

  Result<int> run_once(Duration timeout) {
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    int ran = busy_poll_ ? run_pollers() : 0;
    epoll_event events[kMaxEvents];
    const int n = ::epoll_wait(ep_.get(), events, kMaxEvents, ran > 0 ? 0 : wait_ms(timeout));
    if (n < 0 && errno != EINTR) return errno_code(errno);
    bool timers_due = false;
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
        timers_due = true;
        continue;
      }
      auto it = watchers_.find(key);
      if (it == watchers_.end()) continue;  // removed earlier in this batch
      const std::uint32_t ev = from_epoll(events[i].events) & (it->second.interest | kIoError);
      if (ev == 0) continue;
      auto cb = it->second.callback;  // alive even if the callback unwatches itself
      (*cb)(ev);
      ++ran;
    }
    if (woken) {
      drain_wake();
      ran += run_posted();
    }
    if (timers_due || (!heap_.empty() && heap_.top().deadline <= Clock::now())) {
      ran += fire_timers();
    }
    ran += run_deferred();
    if (!deferred_.empty()) signal();  // keeps fd() readable for an embedding loop
    return ran;
  }
};

Result<std::unique_ptr<EventLoop>> EventLoop::create() {
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
  auto impl = std::make_unique<Impl>(std::move(ep), std::move(wake), std::move(timer));
  return std::unique_ptr<EventLoop>(new EventLoop(std::move(impl)));
}

EventLoop::EventLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EventLoop::~EventLoop() {
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
  for (const auto& [k, svc] : impl_->services_) {
    if (k == key) return svc;
  }
  return nullptr;
}

void EventLoop::set_service(const void* key, std::shared_ptr<void> service) {
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
  const std::uint64_t id = impl_->next_id_++;
  impl_->destroy_hooks_.emplace(id, std::move(task));
  return id;
}

void EventLoop::remove_destroy_hook(std::uint64_t id) {
  impl_->destroy_hooks_.erase(id);
}

Result<WatchId> EventLoop::watch(int fd, std::uint32_t interest, IoCallback callback) {
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
  auto it = impl_->watchers_.find(id);
  if (it == impl_->watchers_.end()) return;
  // EBADF/ENOENT are fine here: the owner may already have closed the fd.
  ::epoll_ctl(impl_->ep_.get(), EPOLL_CTL_DEL, it->second.fd, nullptr);
  impl_->watchers_.erase(it);
}

TimerId EventLoop::add_timer(Duration delay, Task task) {
  return impl_->add_timer(delay, Duration::zero(), std::move(task));
}

TimerId EventLoop::add_periodic(Duration period, Task task) {
  if (period <= Duration::zero()) period = Duration(1);
  return impl_->add_timer(period, period, std::move(task));
}

bool EventLoop::cancel_timer(TimerId id) {
  if (impl_->timers_.erase(id) == 0) return false;
  impl_->compact_heap();
  return true;
}

void EventLoop::defer(Task task) {
  impl_->deferred_.push_back(std::move(task));
  impl_->signal();
}

void EventLoop::post(Task task) {
  {
    std::lock_guard lock(impl_->post_mu_);
    impl_->posted_.push_back(std::move(task));
  }
  impl_->signal();
}

Result<void> EventLoop::run() {
  // exchange: each stop() ends exactly one run(), also when it came before run() started.
  while (!impl_->stop_.exchange(false, std::memory_order_acq_rel)) {
    auto r = impl_->run_once(Duration(-1));
    if (!r) return r.error();
  }
  return {};
}

void EventLoop::stop() {
  impl_->stop_.store(true, std::memory_order_release);
  impl_->signal();
}

Result<int> EventLoop::run_once(Duration timeout) {
  return impl_->run_once(timeout);
}

bool EventLoop::run_until(const std::function<bool()>& done, Clock::time_point deadline) {
  if (done()) return true;
  // One loop timer for the deadline instead of a timeout on every epoll_wait: a timed
  // epoll_wait arms a kernel timer per sleep, which costs about a microsecond a wakeup.
  const auto now = Clock::now();
  bool expired = now >= deadline;
  // A far deadline (time_point::max() included) means no guard timer: deadline - now
  // would overflow.
  const bool far = deadline > now + std::chrono::hours(24 * 365);
  const TimerId guard = far ? 0 : add_timer(deadline - now, [&expired] { expired = true; });
  while (!done() && !expired) {
    if (!impl_->run_once(Duration(-1))) break;
  }
  if (guard != 0) cancel_timer(guard);
  return done();
}

void EventLoop::set_busy_poll(bool on) noexcept {
  impl_->busy_poll_ = on;
}
bool EventLoop::busy_poll() const noexcept {
  return impl_->busy_poll_;
}

std::uint64_t EventLoop::add_poller(std::function<bool()> poll) {
  const auto id = impl_->next_id_++;
  impl_->pollers_.emplace(id, std::make_shared<std::function<bool()>>(std::move(poll)));
  return id;
}

void EventLoop::remove_poller(std::uint64_t id) {
  impl_->pollers_.erase(id);
}

int EventLoop::fd() const noexcept {
  return impl_->ep_.get();
}

bool EventLoop::in_loop_thread() const noexcept {
  return impl_->owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

}  // namespace rmsg
