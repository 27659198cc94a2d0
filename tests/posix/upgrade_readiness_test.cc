// Readiness and options on an upgraded connection (docs/socket-shim.md, "Readiness lives in
// a shim-owned eventfd"), in the Soft-RoCE guest through the C API: epoll registrations
// made before the upgrade, several sets, EPOLLONESHOT, EPOLLOUT back-pressure, a reader
// after the peer's TCP FIN, SO_RCVTIMEO/SO_SNDTIMEO, MSG_WAITALL across the cut-over
// offset. Each waits with a deadline, never a
// sleep; a check that something does not happen looks once its cause is known to be there.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "posix/seams.h"
#include "rmsg/socket.h"
#include "upgrade_kit.h"

namespace {

using rmsg::posix::seams::upgrade_view;
using namespace rmsg::posix::testkit;  // NOLINT(google-build-using-namespace)
using Clock = std::chrono::steady_clock;

constexpr int kDeadlineMs = 10000;

void tick() {
  pollfd none{-1, 0, 0};
  rmsg_poll(&none, 1, 1);
}

// Until `done` or the deadline.
bool until(const std::function<bool()>& done, int ms = kDeadlineMs) {
  auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (Clock::now() > end) return false;
    tick();
  }
  return true;
}

// Until thread tid sleeps in epoll_wait (/proc says which system call it is in).
bool asleep_in_epoll(pid_t tid) {
  return until([tid] {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
    long nr = -1;
    f >> nr;
    return nr == SYS_epoll_wait || nr == SYS_epoll_pwait;
  });
}

// Bytes a read would return now (peeked).
std::size_t peekable(int fd) {
  static unsigned char buf[1 << 20];
  ssize_t r = rmsg_recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  return r > 0 ? static_cast<std::size_t>(r) : 0;
}

void set_nonblocking(int fd) {
  ASSERT_EQ(rmsg_fcntl(fd, F_SETFL, rmsg_fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

int ctl(int ep, int op, int fd, std::uint32_t events, std::uint64_t data) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = data;
  return rmsg_epoll_ctl(ep, op, fd, &ev);
}

class ShimUpgradeReadiness : public ShimUpgrade {
 protected:
  // A connection upgraded both ways: the client (connector) c, the server (acceptor) s.
  // `before_connect` runs on the client's socket before connect(), `before_read` on the
  // server's once the client's 10 first bytes (over TCP) are on their way, before the
  // server reads them: the connection upgrades under the registrations they make.
  void connect_pair(const std::function<void(int)>& before_connect = {},
                    const std::function<void(int)>& before_read = {}) {
    l_ = shim_listen();
    c_ = rmsg_socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(c_, 0);
    if (before_connect) before_connect(c_);
    ASSERT_EQ(rmsg_connect(c_, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
    s_ = rmsg_accept(l_, nullptr, nullptr);
    ASSERT_GE(s_, 0);
    ASSERT_EQ(rmsg_write(c_, "0123456789", 10), 10);
    if (before_read) before_read(s_);
    char first[10];
    ASSERT_EQ(rmsg_recv(s_, first, 10, MSG_WAITALL), 10);
    ASSERT_TRUE(attempt_over(c_));
    ASSERT_EQ(upgrade_view(c_).fallback, "none");
    ASSERT_TRUE(until([&] { return upgrade_view(s_).fallback == "none"; }));
  }

  void TearDown() override {
    for (int fd : {c_, s_, l_}) {
      if (fd >= 0) rmsg_close(fd);
    }
  }

  int l_ = -1, c_ = -1, s_ = -1;
};

// Reads everything there is now (non-blocking) into got; false at end of stream.
bool drain(int fd, std::vector<unsigned char>& got) {
  unsigned char buf[65536];
  for (;;) {
    ssize_t r = rmsg_read(fd, buf, sizeof buf);
    if (r > 0) {
      got.insert(got.end(), buf, buf + r);
      continue;
    }
    if (r == 0) return false;
    EXPECT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
    return true;
  }
}

// Registrations made before connect() in two sets (level and edge-triggered), threads
// asleep in each when the RDMA bytes come; then MOD and DEL after the upgrade.
TEST_F(ShimUpgradeReadiness, EarlierRegistrationsInTwoSetsWakeSleepersOnRdmaBytes) {
  int ep1 = rmsg_epoll_create1(0);
  int ep2 = rmsg_epoll_create1(0);
  connect_pair([&](int c) {
    ASSERT_EQ(ctl(ep1, EPOLL_CTL_ADD, c, EPOLLIN, 1), 0);
    ASSERT_EQ(ctl(ep2, EPOLL_CTL_ADD, c, EPOLLIN | EPOLLET, 2), 0);
  });
  set_nonblocking(c_);
  std::atomic<pid_t> tid1{0}, tid2{0};
  std::uint64_t woke1 = 0, woke2 = 0;
  auto sleeper = [](int ep, std::atomic<pid_t>& tid, std::uint64_t& woke) {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    epoll_event e[4];
    int n = rmsg_epoll_wait(ep, e, 4, kDeadlineMs);
    EXPECT_GE(n, 1) << "not woken within the deadline";
    for (int i = 0; i < n; ++i) {
      EXPECT_NE(e[i].events & EPOLLIN, 0u);
      woke = e[i].data.u64;
    }
  };
  std::thread t1(sleeper, ep1, std::ref(tid1), std::ref(woke1));
  std::thread t2(sleeper, ep2, std::ref(tid2), std::ref(woke2));
  ASSERT_TRUE(until([&] { return tid1.load() != 0 && tid2.load() != 0; }));
  EXPECT_TRUE(asleep_in_epoll(tid1));
  EXPECT_TRUE(asleep_in_epoll(tid2));
  auto down = pattern(1500, 11);
  ASSERT_TRUE(write_all(s_, down.data(), 1000));
  t1.join();
  t2.join();
  EXPECT_EQ(woke1, 1u);
  EXPECT_EQ(woke2, 2u);
  ASSERT_TRUE(until([&] { return peekable(c_) == 1000; }));
  epoll_event e[4];
  EXPECT_EQ(rmsg_epoll_wait(ep1, e, 4, 0), 1);  // level: still unread
  EXPECT_EQ(rmsg_epoll_wait(ep2, e, 4, 0), 0);  // edge: reported once
  std::vector<unsigned char> got;
  EXPECT_TRUE(drain(c_, got));
  EXPECT_EQ(rmsg_epoll_wait(ep1, e, 4, 0), 0);  // nothing to read, nothing reported

  ASSERT_EQ(ctl(ep1, EPOLL_CTL_MOD, c_, EPOLLIN, 11), 0);
  ASSERT_EQ(ctl(ep2, EPOLL_CTL_DEL, c_, 0, 0), 0);
  ASSERT_TRUE(write_all(s_, down.data() + 1000, 500));
  int n = rmsg_epoll_wait(ep1, e, 4, kDeadlineMs);
  ASSERT_GE(n, 1);
  for (int i = 0; i < n; ++i) EXPECT_EQ(e[i].data.u64, 11u);
  ASSERT_TRUE(until([&] { return peekable(c_) == 500; }));
  EXPECT_EQ(rmsg_epoll_wait(ep2, e, 4, 0), 0);  // deleted
  EXPECT_TRUE(drain(c_, got));
  EXPECT_TRUE(got == down) << got.size();
  rmsg_close(ep1);
  rmsg_close(ep2);
}

// EPOLLONESHOT on the acceptor: the registration fires on the TCP bytes before the
// upgrade and stays disarmed through the cut-over and the RDMA bytes that follow; MOD
// re-arms it, and it fires once again.
TEST_F(ShimUpgradeReadiness, OneShotStaysDisarmedAcrossTheCutOverUntilMod) {
  int ep = rmsg_epoll_create1(0);
  epoll_event e[4];
  connect_pair({}, [&](int s) {
    ASSERT_EQ(ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN | EPOLLONESHOT, 7), 0);
    ASSERT_EQ(rmsg_epoll_wait(ep, e, 4, kDeadlineMs), 1);  // the TCP bytes: disarmed
    EXPECT_EQ(e[0].data.u64, 7u);
  });
  set_nonblocking(s_);
  auto up = pattern(300, 12);
  ASSERT_TRUE(write_all(c_, up.data(), 100));
  ASSERT_TRUE(until([&] { return peekable(s_) == 100; }));
  EXPECT_EQ(rmsg_epoll_wait(ep, e, 4, 0), 0) << "a disarmed EPOLLONESHOT registration fired";
  ASSERT_TRUE(write_all(c_, up.data() + 100, 100));
  ASSERT_TRUE(until([&] { return peekable(s_) == 200; }));
  EXPECT_EQ(rmsg_epoll_wait(ep, e, 4, 0), 0) << "a disarmed EPOLLONESHOT registration fired";
  ASSERT_EQ(ctl(ep, EPOLL_CTL_MOD, s_, EPOLLIN | EPOLLONESHOT, 8), 0);
  ASSERT_EQ(rmsg_epoll_wait(ep, e, 4, kDeadlineMs), 1);
  EXPECT_EQ(e[0].data.u64, 8u);
  ASSERT_TRUE(write_all(c_, up.data() + 200, 100));
  ASSERT_TRUE(until([&] { return peekable(s_) == 300; }));
  EXPECT_EQ(rmsg_epoll_wait(ep, e, 4, 0), 0);
  std::vector<unsigned char> got;
  EXPECT_TRUE(drain(s_, got));
  EXPECT_TRUE(got == up) << got.size();
  // Re-armed with nothing to read: it fires once at the next bytes.
  ASSERT_EQ(ctl(ep, EPOLL_CTL_MOD, s_, EPOLLIN | EPOLLONESHOT, 9), 0);
  EXPECT_EQ(rmsg_epoll_wait(ep, e, 4, 0), 0);
  ASSERT_TRUE(write_all(c_, up.data(), 1));
  ASSERT_EQ(rmsg_epoll_wait(ep, e, 4, kDeadlineMs), 1);
  EXPECT_EQ(e[0].data.u64, 9u);
  rmsg_close(ep);
}

// EPOLLOUT means room in the RDMA send buffer: none while it is full (the peer does not
// read), and an edge-triggered writer that got EAGAIN is woken when room returns.
TEST_F(ShimUpgradeReadiness, EpollOutFollowsRoomInTheRdmaSendBuffer) {
  int lt = rmsg_epoll_create1(0);
  int et = rmsg_epoll_create1(0);
  connect_pair([&](int c) {
    ASSERT_EQ(ctl(lt, EPOLL_CTL_ADD, c, EPOLLOUT, 1), 0);
    ASSERT_EQ(ctl(et, EPOLL_CTL_ADD, c, EPOLLOUT | EPOLLET, 2), 0);
  });
  set_nonblocking(c_);
  auto up = pattern(3 << 20, 13);
  std::size_t sent = 0;
  auto write_some = [&] {  // until EAGAIN; false when the first write got EAGAIN
    bool first = true;
    while (sent < up.size()) {
      ssize_t w = rmsg_write(c_, up.data() + sent, std::min<std::size_t>(up.size() - sent, 65536));
      if (w < 0) {
        EXPECT_EQ(errno, EAGAIN);
        return !first;
      }
      sent += static_cast<std::size_t>(w);
      first = false;
    }
    return true;
  };
  write_some();
  ASSERT_LT(sent, up.size()) << "the peer reads nothing: the buffers must fill";
  epoll_event e[4];
  EXPECT_EQ(rmsg_epoll_wait(lt, e, 4, 0), 0) << "EPOLLOUT with a full send buffer";
  std::vector<unsigned char> got;
  std::thread reader([&] {
    unsigned char buf[65536];
    while (got.size() < up.size()) {
      ssize_t r = rmsg_read(s_, buf, sizeof buf);
      if (r <= 0) break;
      got.insert(got.end(), buf, buf + r);
    }
  });
  int wakeups = 0;
  int empty_wakeups = 0;
  while (sent < up.size()) {
    int n = rmsg_epoll_wait(et, e, 4, kDeadlineMs);
    if (n < 1) {
      ADD_FAILURE() << "no EPOLLOUT within the deadline, " << sent << " bytes sent";
      rmsg_shutdown(c_, SHUT_WR);  // the reader ends
      break;
    }
    EXPECT_NE(e[0].events & EPOLLOUT, 0u);
    ++wakeups;
    if (!write_some()) ++empty_wakeups;
  }
  reader.join();
  EXPECT_TRUE(got == up) << got.size();
  std::printf("EPOLLOUT: %d wake-ups, %d found no room\n", wakeups, empty_wakeups);
  EXPECT_LE(empty_wakeups, wakeups / 4 + 2);
  rmsg_close(lt);
  rmsg_close(et);
}

// The peer writes 2 MiB, then shuts its write side down: its TCP FIN overtakes RDMA bytes
// still in flight. A level-triggered reader (one read per wake-up) counts the wake-ups that
// found nothing to read; `shut_first`: it shut its own write side down before, so the TCP
// connection is shut both ways (the kernel's EPOLLHUP) while the bytes still come.
void level_reader_after_fin(int c, int s, bool shut_first) {
  set_nonblocking(s);
  if (shut_first) {
    ASSERT_EQ(rmsg_shutdown(s, SHUT_WR), 0);
  }
  int ep = rmsg_epoll_create1(0);
  ASSERT_EQ(ctl(ep, EPOLL_CTL_ADD, s, EPOLLIN, 5), 0);
  auto up = pattern(2 << 20, 14);
  std::thread writer([&] {
    EXPECT_TRUE(write_all(c, up.data(), up.size()));
    EXPECT_EQ(rmsg_shutdown(c, SHUT_WR), 0);
  });
  std::vector<unsigned char> got;
  int wakeups = 0;
  int eagain = 0;
  for (bool open = true; open;) {
    epoll_event e[4];
    int n = rmsg_epoll_wait(ep, e, 4, kDeadlineMs);
    if (n < 1) {
      ADD_FAILURE() << "no readiness within the deadline, " << got.size() << " bytes in";
      break;
    }
    ++wakeups;
    unsigned char buf[65536];
    ssize_t r = rmsg_read(s, buf, sizeof buf);
    if (r > 0) got.insert(got.end(), buf, buf + r);
    if (r == 0) open = false;
    if (r < 0) {
      EXPECT_EQ(errno, EAGAIN);
      ++eagain;
    }
  }
  writer.join();
  EXPECT_TRUE(got == up) << got.size();
  std::printf("level reader%s: %d wake-ups, %d found nothing\n", shut_first ? " (shut first)" : "",
              wakeups, eagain);
  EXPECT_LE(eagain, 8);
  rmsg_close(ep);
}

TEST_F(ShimUpgradeReadiness, ALevelTriggeredReaderDoesNotSpinOnThePeersTcpFin) {
  connect_pair();
  level_reader_after_fin(c_, s_, false);
}

// The same with the TCP connection shut down both ways: its EPOLLHUP, which no mask
// holds back, is reported once, not for as long as the RDMA bytes take.
TEST_F(ShimUpgradeReadiness, ALevelTriggeredReaderThatShutItsWritesDoesNotSpinOnTcpHangUp) {
  connect_pair();
  level_reader_after_fin(c_, s_, true);
}

// SO_RCVTIMEO and SO_SNDTIMEO on blocking upgraded sockets: EAGAIN once the time passed
// with nothing to read, or no room to write, as on TCP. A call that does not return by
// the deadline is released by the peer (reading or writing) so the test ends.
TEST_F(ShimUpgradeReadiness, SocketTimeoutsEndBlockedReadsAndWrites) {
  connect_pair();
  timeval t{0, 300000};
  ASSERT_EQ(rmsg_setsockopt(s_, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t), 0);
  ASSERT_EQ(rmsg_setsockopt(c_, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t), 0);

  std::atomic<bool> done{false};
  ssize_t r = 0;
  int err = 0;
  auto start = Clock::now();
  Clock::duration took{};
  std::thread reader([&] {
    char b[16];
    r = rmsg_read(s_, b, sizeof b);
    err = errno;
    took = Clock::now() - start;
    done = true;
  });
  if (!until([&] { return done.load(); })) {
    EXPECT_EQ(rmsg_write(c_, "x", 1), 1);  // release it
  }
  reader.join();
  EXPECT_EQ(r, -1);
  EXPECT_EQ(err, EAGAIN);
  EXPECT_GE(took, std::chrono::milliseconds(300));

  // The server reads nothing: the client's writes fill its buffers, then one blocks.
  done = false;
  auto up = pattern(1 << 20, 15);
  std::size_t sent = 0;
  std::atomic<bool> released{false};
  std::thread writer([&] {
    while (!released.load()) {
      ssize_t w = rmsg_write(c_, up.data(), up.size());
      if (w < 0) {
        err = errno;
        break;
      }
      sent += static_cast<std::size_t>(w);
    }
    done = true;
  });
  bool ended = until([&] { return done.load(); });
  if (!ended) {  // release it
    released = true;
    std::thread([&] {
      unsigned char b[65536];
      while (!done.load()) rmsg_recv(s_, b, sizeof b, MSG_DONTWAIT);
    }).join();
  }
  writer.join();
  EXPECT_TRUE(ended) << "a blocked write ignored SO_SNDTIMEO, " << sent << " bytes sent";
  EXPECT_EQ(err, EAGAIN);
}

// A blocking MSG_WAITALL read spans the cut-over offset: its first bytes come over TCP, the
// rest over RDMA, and it returns once the whole buffer is full, as TCP's does.
TEST_F(ShimUpgradeReadiness, WaitAllFillsTheBufferAcrossTheCutOver) {
  l_ = shim_listen();
  c_ = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rmsg_connect(c_, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  s_ = rmsg_accept(l_, nullptr, nullptr);
  ASSERT_GE(s_, 0);
  auto up = pattern(4000, 16);
  std::vector<unsigned char> got(up.size());
  ssize_t r = -1;
  std::thread reader([&] { r = rmsg_recv(s_, got.data(), got.size(), MSG_WAITALL); });
  EXPECT_TRUE(write_all(c_, up.data(), 1000));  // before the attempt ends: TCP
  EXPECT_TRUE(attempt_over(c_));
  EXPECT_EQ(upgrade_view(c_).fallback, "none");
  EXPECT_TRUE(write_all(c_, up.data() + 1000, 3000));
  reader.join();
  EXPECT_EQ(r, 4000);
  EXPECT_TRUE(got == up);
  EXPECT_EQ(upgrade_view(c_).rdma_bytes_out, 3000u);
  EXPECT_EQ(upgrade_view(s_).rdma_bytes_in, 3000u);
}

}  // namespace
