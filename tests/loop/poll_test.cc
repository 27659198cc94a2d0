// System calls the loop saves, and adaptive polling (EventLoopOptions::poll_spin, pollers
// with an arm step), checked with the loop's counters and fake pollers that count calls.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "rmsg/event_loop.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<EventLoop> make_loop(Duration spin) {
  EventLoopOptions options;
  options.poll_spin = spin;
  auto r = EventLoop::create(options);
  EXPECT_TRUE(r.ok());
  return r ? std::move(r).value() : nullptr;
}

std::uint64_t value(const EventLoop& loop, std::string_view name) {
  return loop.counters().value(name);
}

// Runs `n` iterations as run() does (the loop driven: nothing signals fd() for an
// embedding loop).
void iterate(EventLoop& loop, std::uint64_t n) {
  const auto end = value(loop, "loop.iterations") + n;
  ASSERT_TRUE(loop.run_for([&] { return value(loop, "loop.iterations") >= end; }, 10s));
}

bool fd_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// A poller whose work and arming the test scripts: polls and arms are counted; work is
// found on the polls whose number is in `work_at` (or every poll when `always`).
struct FakePoller {
  int polls = 0;
  int arm_calls = 0;
  int armed_now = 0;  // arm() calls that returned true
  bool armed = false;
  bool always = false;
  std::vector<int> work_at;
  bool poll() {
    ++polls;
    if (always) return true;
    for (int at : work_at) {
      if (at == polls) {
        armed = false;  // work consumes the arm, as a CQ event does
        return true;
      }
    }
    return false;
  }
  bool arm() {
    ++arm_calls;
    if (armed) return false;
    armed = true;
    ++armed_now;
    return true;
  }
  std::uint64_t add_to(EventLoop& loop) {
    return loop.add_poller([this] { return poll(); }, [this] { return arm(); });
  }
};

TEST(LoopSyscalls, DeferFromTheLoopThreadDoesNotWriteTheEventfd) {
  auto loop = make_loop(0us);
  int left = 100;
  std::function<void()> again = [&] {
    if (--left > 0) loop->defer(again);
  };
  loop->post([&] { loop->defer(again); });  // one eventfd write: the post
  ASSERT_TRUE(loop->run_for([&] { return left == 0; }, 5s));
  EXPECT_EQ(value(*loop, "loop.eventfd_wakeups"), 1u);
  EXPECT_EQ(value(*loop, "loop.callbacks"), 101u);
}

TEST(LoopSyscalls, DeferOutsideTheLoopStillMakesFdReadable) {
  auto loop = make_loop(0us);
  bool ran = false;
  loop->defer([&] { ran = true; });  // as an embedding application's own code would
  EXPECT_TRUE(fd_readable(loop->fd()));
  ASSERT_TRUE(loop->run_once(0ms).ok());
  EXPECT_TRUE(ran);
}

TEST(LoopSyscalls, BusyModeLooksAtEpollOnlyAfterAStretchOfEmptyPolling) {
  auto loop = make_loop(0us);
  loop->set_busy_poll(true);
  int polls = 0;
  // Work on every 20th poll: each iteration polls on through its empty passes (for up to
  // 20 us, far more than 20 passes take) and finds the work without a look at epoll.
  // Looking after every 16 empty passes, as before, made 5 looks here. A preempted pass
  // can end a stretch early, so one look is allowed.
  loop->add_poller([&] { return ++polls % 20 == 0; });
  iterate(*loop, 10);
  EXPECT_EQ(value(*loop, "loop.epoll_skips") + value(*loop, "loop.epoll_waits"), 10u);
  EXPECT_LE(value(*loop, "loop.epoll_waits"), 1u);
  EXPECT_GE(polls, 180);
}

TEST(LoopSyscalls, BusyModeStillSeesAnFdEventWhilePollersFindNothing) {
  auto loop = make_loop(0us);
  loop->set_busy_poll(true);
  loop->add_poller([] { return false; });
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  bool readable = false;
  auto w = loop->watch(fds[0], kReadable, [&](std::uint32_t) { readable = true; });
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(::write(fds[1], "x", 1), 1);
  ASSERT_TRUE(loop->run_once(0ms).ok());
  EXPECT_TRUE(readable) << "one busy iteration ends its stretch with a look at epoll";
  loop->unwatch(w.value());
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(LoopSyscalls, PollersAlwaysBusyStillLetEpollLookEvery17thIteration) {
  auto loop = make_loop(0us);
  loop->set_busy_poll(true);
  loop->add_poller([] { return true; });
  iterate(*loop, 34);
  EXPECT_EQ(value(*loop, "loop.epoll_waits"), 2u);  // 16 skips, then one look, twice
  EXPECT_EQ(value(*loop, "loop.epoll_skips"), 32u);
}

TEST(LoopSyscalls, APostIsNotDelayedByBusyPollers) {
  auto loop = make_loop(0us);
  loop->set_busy_poll(true);
  loop->add_poller([] { return true; });
  bool ran = false;
  loop->post([&] { ran = true; });
  ASSERT_TRUE(loop->run_once(0ms).ok());
  EXPECT_TRUE(ran) << "a pending post makes the iteration look at epoll";
}

TEST(AdaptivePoll, ThePollerIsArmedAndPolledOnceMoreBeforeTheLoopSleeps) {
  auto loop = make_loop(0us);  // spinning off: arming alone
  FakePoller p;
  p.add_to(*loop);
  ASSERT_TRUE(loop->run_once(1ms).ok());
  EXPECT_EQ(p.arm_calls, 1);
  EXPECT_EQ(p.polls, 1) << "polled once after it armed";
  ASSERT_TRUE(loop->run_once(1ms).ok());
  EXPECT_EQ(p.arm_calls, 2);
  EXPECT_EQ(p.polls, 1) << "already armed: no poll";
  EXPECT_EQ(value(*loop, "loop.arms"), 1u);
  EXPECT_EQ(value(*loop, "loop.spins"), 0u);
}

TEST(AdaptivePoll, WorkFoundAfterArmingIsRunWithoutSleeping) {
  auto loop = make_loop(0us);
  FakePoller p;
  p.work_at = {1};  // the poll right after the arm finds work
  p.add_to(*loop);
  auto ran = loop->run_once(10s);  // would sleep 10 s if the loop ignored that poll
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran.value(), 1);
  EXPECT_EQ(value(*loop, "loop.epoll_waits"), 0u);
  EXPECT_EQ(value(*loop, "loop.epoll_skips"), 1u);
  EXPECT_TRUE(fd_readable(loop->fd())) << "not armed: an embedding loop must come back";
}

TEST(AdaptivePoll, AfterWorkTheLoopSpinsAndFindsTheNextWorkWithoutAWait) {
  auto loop = make_loop(10s);  // a budget that cannot run out before the 40th poll
  FakePoller p;
  p.work_at = {1, 40};
  p.add_to(*loop);
  iterate(*loop, 1);  // armed, polled once more: work (poll 1)
  EXPECT_EQ(p.armed_now, 1);
  iterate(*loop, 1);  // spins: polls 2..40
  EXPECT_EQ(p.polls, 40);
  EXPECT_EQ(p.armed_now, 1) << "a spin that finds work does not arm";
  EXPECT_EQ(value(*loop, "loop.spins"), 1u);
  EXPECT_EQ(value(*loop, "loop.spin_polls"), 39u);
  EXPECT_EQ(value(*loop, "loop.epoll_waits"), 0u);
  // Two clock checks passed (after polls 16 and 32 of the spin), each with a yield.
  EXPECT_EQ(value(*loop, "loop.yields"), 2u);
}

TEST(AdaptivePoll, ASpinEndsAtItsBudgetThenTheLoopArmsAndSleeps) {
  auto loop = make_loop(200us);
  FakePoller p;
  p.add_to(*loop);
  loop->defer([] {});                     // work: the next iteration spins
  ASSERT_TRUE(loop->run_once(0ms).ok());  // runs the task (armed on the way: embedding)
  const int arms = p.armed_now;
  p.armed = false;                        // as if an event had consumed the arm
  ASSERT_TRUE(loop->run_once(1ms).ok());  // spin, budget out, arm, poll, sleep 1 ms
  EXPECT_EQ(value(*loop, "loop.spins"), 1u);
  EXPECT_GE(value(*loop, "loop.spin_polls"), std::uint64_t{16});  // at least one check
  EXPECT_EQ(p.armed_now, arms + 1);
  EXPECT_GE(value(*loop, "loop.epoll_waits"), 1u);
  ASSERT_TRUE(loop->run_once(1ms).ok());  // nothing ran last time: no spin now
  EXPECT_EQ(value(*loop, "loop.spins"), 1u);
}

TEST(AdaptivePoll, SpinningOffMeansNoSpins) {
  auto loop = make_loop(0us);
  FakePoller p;
  p.work_at = {1, 2, 3};
  p.add_to(*loop);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(loop->run_once(1ms).ok());
  EXPECT_EQ(value(*loop, "loop.spins"), 0u);
  EXPECT_EQ(value(*loop, "loop.spin_polls"), 0u);
}

TEST(AdaptivePoll, AnIdleLoopSleepsThroughASecond) {
  auto loop = make_loop(50us);
  FakePoller p;
  p.add_to(*loop);
  const auto wakeups = value(*loop, "loop.wakeups");
  EXPECT_FALSE(loop->run_for([] { return false; }, 1s));
  // The deadline's own timer is the only wakeup; one arm, one poll after it.
  EXPECT_LE(value(*loop, "loop.wakeups") - wakeups, 1u);
  EXPECT_LE(value(*loop, "loop.iterations"), 3u);
  EXPECT_EQ(p.armed_now, 1);
  EXPECT_LE(p.polls, 2 + static_cast<int>(value(*loop, "loop.spin_polls")));
  EXPECT_LE(value(*loop, "loop.spins"), 1u);
}

TEST(AdaptivePoll, APollerRemovedDuringAPassIsNotCalled) {
  auto loop = make_loop(0us);
  loop->set_busy_poll(true);
  int second_polls = 0;
  std::uint64_t second = 0;
  loop->add_poller([&] {
    loop->remove_poller(second);
    return false;
  });
  second = loop->add_poller([&] { return ++second_polls > 0; });
  ASSERT_TRUE(loop->run_once(0ms).ok());
  EXPECT_EQ(second_polls, 0);
}

}  // namespace
}  // namespace rmsg
