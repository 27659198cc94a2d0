#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "kit/loop_fixture.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
using testing::LoopTest;

struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fd), 0);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
  ~SocketPair() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
};

TEST_F(LoopTest, WatcherSeesReadableAndWritable) {
  SocketPair sp;
  int readable = 0;
  auto w = loop().watch(sp.fd[0], kReadable, [&](std::uint32_t ev) {
    EXPECT_TRUE(ev & kReadable);
    char buf[16];
    EXPECT_EQ(::read(sp.fd[0], buf, sizeof buf), 3);
    ++readable;
  });
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(::write(sp.fd[1], "abc", 3), 3);
  EXPECT_TRUE(loop().run_for([&] { return readable == 1; }, 5s));

  // Switching the interest to writable reports writability and no more reads.
  bool writable = false;
  loop().unwatch(*w);
  auto w2 = loop().watch(sp.fd[0], 0, [&](std::uint32_t ev) {
    EXPECT_FALSE(ev & kReadable);
    writable = (ev & kWritable) != 0;
  });
  ASSERT_TRUE(w2.ok());
  ASSERT_EQ(::write(sp.fd[1], "def", 3), 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_FALSE(writable) << "interest 0 reports nothing";
  ASSERT_TRUE(loop().set_interest(*w2, kWritable).ok());
  EXPECT_TRUE(loop().run_for([&] { return writable; }, 5s));
  EXPECT_EQ(readable, 1);
}

TEST_F(LoopTest, WatchingTwiceFailsWithEexist) {
  SocketPair sp;
  ASSERT_TRUE(loop().watch(sp.fd[0], kReadable, [](std::uint32_t) {}).ok());
  auto again = loop().watch(sp.fd[0], kReadable, [](std::uint32_t) {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error(), std::errc::file_exists);
}

TEST_F(LoopTest, WatcherRemovedInsideItsOwnCallback) {
  SocketPair sp;
  int calls = 0;
  WatchId id = 0;
  auto w = loop().watch(sp.fd[0], kReadable, [&](std::uint32_t) {
    ++calls;
    loop().unwatch(id);  // data stays unread: a live watcher would fire again
  });
  ASSERT_TRUE(w.ok());
  id = *w;
  ASSERT_EQ(::write(sp.fd[1], "x", 1), 1);
  EXPECT_TRUE(loop().run_for([&] { return calls > 0; }, 5s));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_EQ(calls, 1);
}

TEST_F(LoopTest, WatcherRemovedByAnEarlierCallbackInTheSameBatch) {
  SocketPair a, b;
  int calls_a = 0, calls_b = 0;
  WatchId ida = 0, idb = 0;
  // Whichever fires first removes the other; the other must then not run.
  ida = loop()
            .watch(a.fd[0], kReadable,
                   [&](std::uint32_t) {
                     ++calls_a;
                     loop().unwatch(idb);
                     loop().unwatch(ida);
                   })
            .value();
  idb = loop()
            .watch(b.fd[0], kReadable,
                   [&](std::uint32_t) {
                     ++calls_b;
                     loop().unwatch(ida);
                     loop().unwatch(idb);
                   })
            .value();
  ASSERT_EQ(::write(a.fd[1], "x", 1), 1);
  ASSERT_EQ(::write(b.fd[1], "x", 1), 1);
  EXPECT_TRUE(loop().run_for([&] { return calls_a + calls_b > 0; }, 5s));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_EQ(calls_a + calls_b, 1);
}

// A reset, not just a hang-up: bytes written from the watched end sit unread in the other
// end when it closes, so the kernel fails the watched end (ECONNRESET: EPOLLERR|EPOLLHUP).
// The watcher must see kIoError along with its interest, and read() the error itself.
TEST_F(LoopTest, HangupIsReportedAsError) {
  SocketPair sp;
  ASSERT_EQ(::write(sp.fd[0], "unread", 6), 6);
  std::uint32_t seen = 0;
  int read_errno = 0;
  ssize_t read_result = 1;
  auto w = loop().watch(sp.fd[0], kReadable, [&](std::uint32_t ev) {
    if (seen != 0) return;  // the first report: a later read sees the error consumed
    seen = ev;
    char buf[16];
    read_result = ::read(sp.fd[0], buf, sizeof buf);
    read_errno = read_result < 0 ? errno : 0;
  });
  ASSERT_TRUE(w.ok());
  ::close(sp.fd[1]);
  sp.fd[1] = -1;
  EXPECT_TRUE(loop().run_for([&] { return seen != 0; }, 5s));
  loop().unwatch(*w);
  EXPECT_TRUE(seen & kIoError) << "events " << seen;
  EXPECT_TRUE(seen & kReadable) << "events " << seen;
  EXPECT_FALSE(seen & kWritable) << "kWritable is outside the interest: " << seen;
  EXPECT_EQ(read_result, -1);
  EXPECT_EQ(read_errno, ECONNRESET) << std::strerror(read_errno);
}

TEST_F(LoopTest, DeferredTasksRunInOrderAfterCurrentIteration) {
  std::vector<int> order;
  loop().defer([&] {
    order.push_back(1);
    loop().defer([&] { order.push_back(3); });
  });
  loop().defer([&] { order.push_back(2); });
  ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

// run_deferred keeps its batch's storage between iterations; a task that runs the loop
// itself (a nested iteration) must not run or lose the outer batch's tasks.
TEST_F(LoopTest, ATaskThatRunsTheLoopItselfLeavesTheOuterBatchWhole) {
  std::vector<int> order;
  loop().defer([&] {
    order.push_back(1);
    loop().defer([&] { order.push_back(3); });
    ASSERT_TRUE(loop().run_once(0ms).ok());  // nested: runs 3 only
    order.push_back(4);
  });
  loop().defer([&] { order.push_back(2); });
  ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_EQ(order, (std::vector<int>{1, 3, 4, 2}));
  for (int i = 0; i < 3; ++i) {
    loop().defer([&, i] { order.push_back(10 + i); });
    ASSERT_TRUE(loop().run_once(0ms).ok());
  }
  EXPECT_EQ(order, (std::vector<int>{1, 3, 4, 2, 10, 11, 12}));
}

TEST_F(LoopTest, StopEndsRun) {
  loop().add_timer(1ms, [&] { loop().stop(); });
  EXPECT_TRUE(loop().run().ok());
}

TEST_F(LoopTest, EmbeddingThroughFd) {
  // An outer epoll loop watches loop().fd() and drives run_once(0) only when it is readable.
  int outer = ::epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(outer, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(::epoll_ctl(outer, EPOLL_CTL_ADD, loop().fd(), &ev), 0);

  SocketPair sp;
  bool io = false, timer = false, deferred = false;
  ASSERT_TRUE(loop()
                  .watch(sp.fd[0], kReadable,
                         [&](std::uint32_t) {
                           char c;
                           EXPECT_EQ(::read(sp.fd[0], &c, 1), 1);
                           io = true;
                         })
                  .ok());
  loop().add_timer(20ms, [&] {
    timer = true;
    loop().defer([&] { deferred = true; });
  });
  ASSERT_EQ(::write(sp.fd[1], "x", 1), 1);

  const auto deadline = Clock::now() + 5s;
  while (!(io && timer && deferred) && Clock::now() < deadline) {
    epoll_event out{};
    const int n = ::epoll_wait(outer, &out, 1, 1000);
    ASSERT_GE(n, 0);
    if (n == 1) {
      ASSERT_TRUE(loop().run_once(0ms).ok());
    }
  }
  ::close(outer);
  EXPECT_TRUE(io);
  EXPECT_TRUE(timer);
  EXPECT_TRUE(deferred) << "a task deferred by a callback must keep fd() readable";
}

TEST_F(LoopTest, BusyPollRunsPollers) {
  int polls = 0;
  auto id = loop().add_poller([&] { return ++polls < 3; });
  ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_EQ(polls, 0) << "pollers run only in busy-poll mode";
  loop().set_busy_poll(true);
  EXPECT_TRUE(loop().run_for([&] { return polls >= 10; }, 5s));
  loop().remove_poller(id);
  const int before = polls;
  ASSERT_TRUE(loop().run_once(0ms).ok());
  EXPECT_EQ(polls, before);
}

}  // namespace
}  // namespace rmsg
