// The socket shim's RDMA upgrade in the Soft-RoCE guest (docs/socket-shim.md, "The RDMA
// upgrade"): the C API (rmsg/socket.h) with the upgrade engine linked in and
// RMSG_UPGRADE=on, both ends in this process on the guest's RDMA address. Every byte is
// checked; the stats view says which path carried them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kit/rdma_fixture.h"
#include "posix/seams.h"
#include "posix/upgrade_conn.h"
#include "posix/upgrade_wire.h"
#include "rmsg/socket.h"
#include "upgrade_kit.h"

namespace {

using rmsg::posix::seams::upgrade_view;
using namespace rmsg::posix::testkit;  // NOLINT(google-build-using-namespace)

TEST_F(ShimUpgrade, BothEndsUnderTheShimMoveEveryByteOverRdma) {
  int l = shim_listen();
  auto up = pattern(3 << 20, 1);
  auto down = pattern(1 << 20, 2);
  std::size_t half_up = up.size() / 3, half_down = down.size() / 2;
  std::atomic<bool> upgraded{false};
  rmsg::posix::seams::UpgradeView server_view;
  std::vector<unsigned char> server_got;
  std::thread server([&] {
    int c = rmsg_accept(l, nullptr, nullptr);
    ASSERT_GE(c, 0);
    // The first part goes out at once, before the upgrade: the cut-over offsets must
    // deliver it exactly once, in order, before the RDMA bytes.
    std::thread w([&] {
      EXPECT_TRUE(write_all(c, down.data(), half_down));
      while (!upgraded.load()) std::this_thread::yield();
      EXPECT_TRUE(write_all(c, down.data() + half_down, down.size() - half_down));
      EXPECT_EQ(rmsg_shutdown(c, SHUT_WR), 0);
    });
    server_got = read_to_eof(c);
    w.join();
    server_view = upgrade_view(c);
    rmsg_close(c);
  });
  int c = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  std::thread writer([&] {
    EXPECT_TRUE(write_all(c, up.data(), half_up));
    EXPECT_TRUE(attempt_over(c));
    upgraded = true;
    EXPECT_TRUE(write_all(c, up.data() + half_up, up.size() - half_up));
    EXPECT_EQ(rmsg_shutdown(c, SHUT_WR), 0);
  });
  auto client_got = read_to_eof(c);
  writer.join();
  server.join();
  auto client_view = upgrade_view(c);
  rmsg_close(c);
  rmsg_close(l);

  EXPECT_TRUE(client_got == down) << client_got.size() << " of " << down.size();
  EXPECT_TRUE(server_got == up) << server_got.size() << " of " << up.size();
  EXPECT_EQ(client_view.fallback, "none");
  EXPECT_EQ(server_view.fallback, "none");
  EXPECT_TRUE(client_view.on_rdma);
  EXPECT_TRUE(server_view.on_rdma);
  EXPECT_GT(client_view.rdma_bytes_out, 0u);
  EXPECT_GT(server_view.rdma_bytes_in, 0u);
  EXPECT_GE(client_view.rdma_bytes_out, up.size() - half_up);
  EXPECT_GE(client_view.rdma_bytes_in, down.size() - half_down);
  EXPECT_EQ(client_view.bytes_out, up.size());
  EXPECT_EQ(server_view.bytes_in, up.size());
  EXPECT_EQ(client_view.bytes_in, down.size());
  EXPECT_GT(client_view.upgrade_us, 0u);
  std::printf("upgrade: client %llu us, rdma out %llu of %zu; server rdma out %llu of %zu\n",
              static_cast<unsigned long long>(client_view.upgrade_us),
              static_cast<unsigned long long>(client_view.rdma_bytes_out), up.size(),
              static_cast<unsigned long long>(server_view.rdma_bytes_out), down.size());
}

// Edge-triggered epoll on a non-blocking upgraded connection: the reader sleeps in
// epoll_wait while the bytes come over RDMA, and reads each edge until EAGAIN.
TEST_F(ShimUpgrade, EdgeTriggeredEpollSeesRdmaBytes) {
  int l = shim_listen();
  auto up = pattern(2 << 20, 6);
  std::vector<unsigned char> got;
  rmsg::posix::seams::UpgradeView view;
  std::thread server([&] {
    int c = rmsg_accept(l, nullptr, nullptr);
    ASSERT_EQ(rmsg_fcntl(c, F_SETFL, rmsg_fcntl(c, F_GETFL) | O_NONBLOCK), 0);
    int ep = rmsg_epoll_create1(0);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = 42;
    ASSERT_EQ(rmsg_epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev), 0);
    for (bool eof = false; !eof;) {
      epoll_event out[4];
      int n = rmsg_epoll_wait(ep, out, 4, 20000);
      ASSERT_GT(n, 0) << "no readiness within the deadline, " << got.size() << " bytes in";
      for (int i = 0; i < n; ++i) EXPECT_EQ(out[i].data.u64, 42u);
      unsigned char buf[50000];
      for (;;) {  // the edge: read until EAGAIN
        ssize_t r = rmsg_read(c, buf, sizeof buf);
        if (r > 0) {
          got.insert(got.end(), buf, buf + r);
          continue;
        }
        if (r == 0) eof = true;
        if (r < 0) {
          EXPECT_EQ(errno, EAGAIN);
        }
        break;
      }
    }
    view = upgrade_view(c);
    rmsg_close(c);
    rmsg_close(ep);
  });
  int c = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  ASSERT_TRUE(write_all(c, up.data(), 1000));
  ASSERT_TRUE(attempt_over(c));
  EXPECT_EQ(upgrade_view(c).fallback, "none");
  ASSERT_TRUE(write_all(c, up.data() + 1000, up.size() - 1000));
  EXPECT_EQ(rmsg_shutdown(c, SHUT_WR), 0);
  server.join();
  rmsg_close(c);
  rmsg_close(l);
  EXPECT_TRUE(got == up) << got.size();
  EXPECT_TRUE(view.on_rdma);
  EXPECT_EQ(view.rdma_bytes_in, up.size() - 1000);
}

// A non-blocking connect (EINPROGRESS, then writable in select and SO_ERROR 0) upgrades
// too, and select() on both ends sees the RDMA bytes: the reader sleeps in select() while
// they come, the writer waits in select() for room (iperf3's pattern).
TEST_F(ShimUpgrade, NonBlockingConnectAndSelectUpgradeAndSeeRdmaBytes) {
  int l = shim_listen();
  auto up = pattern(2 << 20, 7);
  std::vector<unsigned char> got;
  rmsg::posix::seams::UpgradeView view;
  std::thread server([&] {
    int c = rmsg_accept(l, nullptr, nullptr);
    ASSERT_GE(c, 0);
    unsigned char buf[50000];
    for (;;) {
      fd_set r;
      FD_ZERO(&r);
      FD_SET(c, &r);
      timeval t{20, 0};  // a deadline, not a wait for an event
      ASSERT_EQ(rmsg_select(c + 1, &r, nullptr, nullptr, &t), 1) << got.size() << " bytes in";
      ASSERT_TRUE(FD_ISSET(c, &r));
      ssize_t n = rmsg_read(c, buf, sizeof buf);
      ASSERT_GE(n, 0) << std::strerror(errno);
      if (n == 0) break;
      got.insert(got.end(), buf, buf + n);
    }
    view = upgrade_view(c);
    rmsg_close(c);
  });
  int c = rmsg_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int rc = rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_);
  ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
  fd_set w;
  FD_ZERO(&w);
  FD_SET(c, &w);
  timeval t{20, 0};
  ASSERT_EQ(rmsg_select(c + 1, nullptr, &w, nullptr, &t), 1);
  int err = -1;
  socklen_t len = sizeof err;
  ASSERT_EQ(rmsg_getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  ASSERT_EQ(err, 0);
  auto send_some = [&](std::size_t from, std::size_t to) {
    while (from < to) {
      fd_set ws;
      FD_ZERO(&ws);
      FD_SET(c, &ws);
      timeval d{20, 0};
      ASSERT_EQ(rmsg_select(c + 1, nullptr, &ws, nullptr, &d), 1);
      ssize_t n = rmsg_write(c, up.data() + from, std::min<std::size_t>(to - from, 30000));
      if (n < 0) {
        ASSERT_EQ(errno, EAGAIN);
        continue;
      }
      from += static_cast<std::size_t>(n);
    }
  };
  send_some(0, 1000);
  ASSERT_TRUE(attempt_over(c));
  EXPECT_EQ(upgrade_view(c).fallback, "none");
  send_some(1000, up.size());
  EXPECT_EQ(rmsg_shutdown(c, SHUT_WR), 0);
  server.join();
  rmsg_close(c);
  rmsg_close(l);
  EXPECT_TRUE(got == up) << got.size();
  EXPECT_EQ(view.fallback, "none");
  EXPECT_EQ(view.rdma_bytes_in, up.size() - 1000);
}

// A blocking reader that waits in poll() and reads when poll says so (iperf3's control
// connection): during the attempt the engine's state changes (OFFER, nonce, CUTOVER) must
// not read as input, or the program's read sleeps until the peer's next bytes.
TEST_F(ShimUpgrade, APollDuringTheAttemptSaysReadableOnlyWithBytesToRead) {
  int l = shim_listen();
  std::atomic<int> server_fd{-1};
  int spurious = 0;
  std::string got;
  rmsg::posix::seams::UpgradeView view;
  std::thread server([&] {
    int c = rmsg_accept(l, nullptr, nullptr);
    ASSERT_GE(c, 0);
    unsigned char cookie[37];
    EXPECT_EQ(rmsg_recv(c, cookie, sizeof cookie, MSG_WAITALL), 37);
    server_fd = c;
    char buf[64];
    for (;;) {
      pollfd p{c, POLLIN, 0};
      ASSERT_EQ(rmsg_poll(&p, 1, 20000), 1) << got;  // a deadline, not a wait for an event
      ssize_t n = rmsg_recv(c, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0) {
        ASSERT_EQ(errno, EAGAIN) << std::strerror(errno);
        ++spurious;  // readable, and nothing to read: a blocking read would sleep here
        continue;
      }
      if (n == 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    view = upgrade_view(c);
    rmsg_close(c);
  });
  int c = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  auto cookie = pattern(37, 9);
  ASSERT_TRUE(write_all(c, cookie.data(), cookie.size()));
  EXPECT_TRUE(attempt_over(c));
  // Until the acceptor cut over too (a deadline, not a wait for an event).
  for (int i = 0; i < 10000 && (server_fd < 0 || upgrade_view(server_fd).fallback != "none"); ++i) {
    pollfd none{-1, 0, 0};
    rmsg_poll(&none, 1, 1);
  }
  ASSERT_EQ(rmsg_write(c, "hello", 5), 5);
  EXPECT_EQ(rmsg_shutdown(c, SHUT_WR), 0);
  server.join();
  auto client_view = upgrade_view(c);
  rmsg_close(c);
  rmsg_close(l);
  EXPECT_EQ(got, "hello");
  EXPECT_EQ(spurious, 0) << "poll said readable with nothing to read";
  EXPECT_EQ(client_view.fallback, "none");
  EXPECT_EQ(view.fallback, "none");
  EXPECT_EQ(view.rdma_bytes_in, 5u);
}

// A connector that the kernel lets connect as soon as listen() returns (a client retrying
// until the server listens) must find the rdma_cm listener there: the shim puts it up
// before the kernel's listen. Checked right after the first TCP connect succeeds: the
// rdma_cm port is taken (a bind there fails with EADDRINUSE).
TEST_F(ShimUpgrade, TheRdmaListenerIsUpBeforeTheKernelAcceptsAConnection) {
  for (int round = 0; round < 5; ++round) {
    int l = rmsg_socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = addr_;
    a.sin_port = 0;
    ASSERT_EQ(rmsg_bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ASSERT_EQ(rmsg_getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
    rdma_event_channel* ch = rdma_create_event_channel();
    ASSERT_NE(ch, nullptr);
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
    std::atomic<bool> spinning{false};
    int bind_rc = 0, bind_errno = 0;
    std::thread client([&] {
      // The plain C library's calls: this end is no shimmed program.
      for (int i = 0; i < 200000; ++i) {
        int s = ::socket(AF_INET, SOCK_STREAM, 0);
        int rc = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::close(s);
        spinning = true;
        if (rc == 0) {
          bind_rc = rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a));
          bind_errno = errno;
          return;
        }
      }
      bind_rc = -2;
    });
    while (!spinning.load()) std::this_thread::yield();
    ASSERT_EQ(rmsg_listen(l, 8), 0);
    client.join();
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
    rmsg_close(l);
    ASSERT_NE(bind_rc, -2) << "never connected";
    EXPECT_EQ(bind_rc, -1) << "round " << round << ": the rdma_cm port was free after the "
                           << "kernel accepted a connection";
    EXPECT_EQ(bind_errno, EADDRINUSE) << std::strerror(bind_errno);
  }
}

// An acceptor whose program only writes once it read the first bytes (iperf3's reverse
// mode: a cookie, then data one way) still cuts over: the engine looks for the nonce at
// the offset itself.
TEST_F(ShimUpgrade, AnAcceptorThatNeverReadsCutsOverItsWrites) {
  int l = shim_listen();
  auto down = pattern(2 << 20, 8);
  std::atomic<bool> upgraded{false};
  rmsg::posix::seams::UpgradeView view;
  std::thread server([&] {
    int c = rmsg_accept(l, nullptr, nullptr);
    ASSERT_GE(c, 0);
    unsigned char cookie[37];
    EXPECT_EQ(rmsg_recv(c, cookie, sizeof cookie, MSG_WAITALL), 37);  // then it never reads
    EXPECT_TRUE(write_all(c, down.data(), 1000));
    while (!upgraded.load()) std::this_thread::yield();
    EXPECT_TRUE(write_all(c, down.data() + 1000, down.size() - 1000));
    EXPECT_EQ(rmsg_shutdown(c, SHUT_WR), 0);
    view = upgrade_view(c);
    rmsg_close(c);
  });
  int c = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  ASSERT_TRUE(write_all(c, down.data(), 37));  // as iperf3's cookie
  EXPECT_TRUE(attempt_over(c));
  upgraded = true;
  auto got = read_to_eof(c);
  server.join();
  auto client_view = upgrade_view(c);
  rmsg_close(c);
  rmsg_close(l);
  EXPECT_TRUE(got == down) << got.size();
  EXPECT_EQ(client_view.fallback, "none");
  EXPECT_EQ(view.fallback, "none");
  EXPECT_GE(view.rdma_bytes_out, down.size() - 1000);
  EXPECT_GE(client_view.rdma_bytes_in, down.size() - 1000);
}

TEST_F(ShimUpgrade, ClosingWithUnreadRdmaBytesResetsThePeer) {
  int l = shim_listen();
  std::atomic<bool> unread_there{false};
  std::thread server([&] {
    int c = rmsg_accept(l, nullptr, nullptr);
    char buf[200];
    EXPECT_EQ(rmsg_recv(c, buf, 10, MSG_WAITALL), 10);    // TCP, then the nonce is checked
    EXPECT_EQ(rmsg_recv(c, buf, 100, MSG_WAITALL), 100);  // RDMA
    EXPECT_TRUE(upgrade_view(c).on_rdma);
    // More RDMA bytes wait unread (peeked, so they are there) when the program closes.
    EXPECT_GT(rmsg_recv(c, buf, 1, MSG_PEEK), 0);
    unread_there = true;
    rmsg_close(c);
  });
  int c = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  auto bytes = pattern(1110, 5);
  ASSERT_TRUE(write_all(c, bytes.data(), 10));
  ASSERT_TRUE(attempt_over(c));
  EXPECT_EQ(upgrade_view(c).fallback, "none");
  ASSERT_TRUE(write_all(c, bytes.data() + 10, 100));
  ASSERT_TRUE(write_all(c, bytes.data() + 110, 1000));
  server.join();
  char buf[16];
  errno = 0;
  EXPECT_EQ(rmsg_read(c, buf, sizeof buf), -1);
  EXPECT_EQ(errno, ECONNRESET);
  rmsg_close(c);
  rmsg_close(l);
}

TEST_F(ShimUpgrade, APlainPeerKeepsExactTcpWithReasonPeer) {
  // A plain acceptor (the kernel's calls): the shimmed connector's rdma_cm request finds
  // no listener (a CM reject), nothing is written into TCP.
  int pl = ::socket(AF_INET, SOCK_STREAM, 0);
  addr_.sin_port = 0;
  ASSERT_EQ(::bind(pl, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  ASSERT_EQ(::listen(pl, 8), 0);
  socklen_t len = sizeof addr_;
  ASSERT_EQ(::getsockname(pl, reinterpret_cast<sockaddr*>(&addr_), &len), 0);
  auto up = pattern(200000, 3);
  std::vector<unsigned char> plain_got;
  std::thread plain([&] {
    int c = ::accept(pl, nullptr, nullptr);
    unsigned char buf[8192];
    for (ssize_t r; (r = ::read(c, buf, sizeof buf)) > 0;)
      plain_got.insert(plain_got.end(), buf, buf + r);
    ::close(c);
  });
  int c = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  EXPECT_TRUE(write_all(c, up.data(), up.size()));
  // The attempt ends on its own (a reject in one round trip, or the deadline).
  for (int i = 0; i < 2000 && upgrade_view(c).fallback == "pending"; ++i) {
    pollfd none{-1, 0, 0};
    rmsg_poll(&none, 1, 1);
  }
  EXPECT_EQ(rmsg_shutdown(c, SHUT_WR), 0);
  plain.join();
  auto v = upgrade_view(c);
  rmsg_close(c);
  ::close(pl);
  EXPECT_TRUE(plain_got == up) << plain_got.size();
  EXPECT_EQ(v.fallback, "peer");
  EXPECT_FALSE(v.on_rdma);
  EXPECT_EQ(v.rdma_bytes_out, 0u);
}

// The acceptor's program reads while the OFFER arrives: its read computed its limit before
// the cap existed and is inside the kernel's call (held there by the test) when the cap is
// set. Had the attempt gone on, the connector's nonce would follow the cap in TCP and that
// read would take it as data. The acceptor refuses the OFFER instead (busy): the bytes
// stay exact on TCP.
std::atomic<int> g_window{0};  // 0 armed, 1 a read waits in the window, 2 released

void hold_first_read() {
  int armed = 0;
  if (!g_window.compare_exchange_strong(armed, 1)) return;
  for (int i = 0; i < 30000 && g_window.load() == 1; ++i) {  // a deadline, not a wait
    pollfd none{-1, 0, 0};
    ::poll(&none, 1, 1);
  }
}

TEST_F(ShimUpgrade, AReadInsideTheKernelWhenTheOfferArrivesNeverTakesTheNonce) {
  int l = shim_listen();
  int c = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  g_window.store(0);
  rmsg::posix::g_tcp_read_window.store(&hold_first_read);
  int a = rmsg_accept(l, nullptr, nullptr);
  ASSERT_GE(a, 0);
  std::vector<unsigned char> first(4096);
  ssize_t got = -1;
  std::thread reader([&] { got = rmsg_read(a, first.data(), first.size()); });
  for (int i = 0; i < 20000 && g_window.load() != 1; ++i) {  // a deadline, not a wait
    pollfd none{-1, 0, 0};
    rmsg_poll(&none, 1, 1);
  }
  auto up = pattern(1000, 11);
  ASSERT_TRUE(write_all(c, up.data(), up.size()));
  // Held in the window until the connector's attempt ended with every byte in TCP, or its
  // nonce is in TCP (the kernel's own peek: past what the program wrote).
  const auto size = static_cast<ssize_t>(up.size());
  bool settled = false;
  for (int i = 0; i < 20000 && !settled; ++i) {
    unsigned char peek[2048];
    ssize_t n = ::recv(a, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT);
    settled = (upgrade_view(c).fallback != "pending" && n >= size) || n > size;
    pollfd none{-1, 0, 0};
    if (!settled) rmsg_poll(&none, 1, 1);
  }
  EXPECT_TRUE(settled);
  g_window.store(2);
  reader.join();
  rmsg::posix::g_tcp_read_window.store(nullptr);
  ASSERT_EQ(got, static_cast<ssize_t>(up.size()));
  first.resize(static_cast<std::size_t>(got));
  EXPECT_TRUE(first == up);
  EXPECT_EQ(upgrade_view(c).fallback, "busy");
  rmsg_close(c);
  rmsg_close(a);
  rmsg_close(l);
}

TEST_F(ShimUpgrade, AForgedBindingFromAHostKnowingTheFourTupleIsRefused) {
  int l = shim_listen();
  // The real peer: plain TCP, no shim.
  int plain = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(plain, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
  int s = rmsg_accept(l, nullptr, nullptr);
  ASSERT_GE(s, 0);
  sockaddr_in6 mine{}, theirs{};
  socklen_t a = sizeof mine, b = sizeof theirs;
  ASSERT_EQ(::getsockname(plain, reinterpret_cast<sockaddr*>(&mine), &a), 0);
  ASSERT_EQ(::getpeername(plain, reinterpret_cast<sockaddr*>(&theirs), &b), 0);

  // The forger: an rdma_cm connection to the shim's port claiming that 4-tuple.
  auto loop = rmsg::EventLoop::create().value();
  auto target =
      rmsg::SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&addr_), sizeof addr_);
  rmsg::Stream forged;
  bool done = false;
  rmsg::rdma_connect(*loop, target, rmsg::testing::test_options(),
                     [&](rmsg::Result<rmsg::Stream> r) {
                       ASSERT_TRUE(r) << r.error().message();
                       forged = std::move(r.value());
                       done = true;
                     });
  ASSERT_TRUE(loop->run_for([&] { return done; }, std::chrono::seconds(10)));
  namespace wire = rmsg::posix::upgrade_wire;
  wire::Offer offer;
  offer.local = mine;
  offer.peer = theirs;
  offer.offset = 0;
  std::uint8_t rec[wire::kOfferSize];
  wire::encode(offer, std::span<std::uint8_t, wire::kOfferSize>(rec));
  ASSERT_TRUE(forged.write(rec, sizeof rec));
  std::string challenge;
  ASSERT_TRUE(loop->run_for(
      [&] {
        char buf[64];
        auto r = forged.read(buf, sizeof buf);
        if (r && r.value() > 0) challenge.append(buf, r.value());
        return challenge.size() >= wire::kChallengeSize;
      },
      std::chrono::seconds(10)));
  auto ch = wire::decode_challenge(std::span<const std::uint8_t, wire::kChallengeSize>(
      reinterpret_cast<const std::uint8_t*>(challenge.data()), wire::kChallengeSize));
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->status, wire::Status::ok);  // the 4-tuple and source address matched

  // The real peer's bytes, not the nonce: the acceptor reads them all, exactly.
  auto data = pattern(5000, 4);
  ASSERT_EQ(::write(plain, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ::shutdown(plain, SHUT_WR);
  std::vector<unsigned char> got;
  unsigned char buf[4096];
  for (ssize_t r; (r = rmsg_read(s, buf, sizeof buf)) > 0;) got.insert(got.end(), buf, buf + r);
  EXPECT_TRUE(got == data) << got.size();
  EXPECT_EQ(upgrade_view(s).fallback, "binding");
  EXPECT_FALSE(upgrade_view(s).on_rdma);
  // The forged stream is closed by the acceptor.
  EXPECT_TRUE(loop->run_for(
      [&] {
        char tail[64];
        auto r = forged.read(tail, sizeof tail);
        return !r ? r.error() != rmsg::Errc::would_block : r.value() == 0;
      },
      std::chrono::seconds(10)));
  // The program's side is untouched: it can still answer on TCP.
  EXPECT_EQ(rmsg_write(s, "ok", 2), 2);
  char two[2];
  EXPECT_EQ(::read(plain, two, 2), 2);
  rmsg_close(s);
  rmsg_close(l);
  ::close(plain);
}

}  // namespace
