// The C API (rmsg/socket.h) in-process, through its header only: which descriptors it
// manages and how dup/close/close_range follow them. Kernel semantics under the shim are
// in preload_test.cc (the same code, run as librmsg-preload.so under plain programs).
#include "rmsg/socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cstring>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "kit/seed.h"

#include "posix/seams.h"

namespace {

int loopback_listener() {
  int l = rmsg_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(rmsg_bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(rmsg_listen(l, 8), 0);
  return l;
}

struct Pair {
  int a = -1, b = -1;
};

Pair connected_pair() {
  int l = loopback_listener();
  sockaddr_in a{};
  socklen_t len = sizeof a;
  EXPECT_EQ(rmsg_getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
  Pair p;
  p.a = rmsg_socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  EXPECT_EQ(rmsg_connect(p.a, reinterpret_cast<sockaddr*>(&a), len), 0);
  sockaddr_in peer{};
  socklen_t peer_len = 4;  // too short: the kernel truncates, and says how long it was
  p.b = rmsg_accept(l, reinterpret_cast<sockaddr*>(&peer), &peer_len);
  EXPECT_GE(p.b, 0);
  EXPECT_EQ(peer_len, sizeof(sockaddr_in));
  EXPECT_EQ(rmsg_close(l), 0);
  return p;
}

TEST(PosixApi, ManagesTcpSocketsOnly) {
  int tcp = rmsg_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int tcp6 = rmsg_socket(AF_INET6, SOCK_STREAM, IPPROTO_TCP);
  int udp = rmsg_socket(AF_INET, SOCK_DGRAM, 0);
  int unix_stream = rmsg_socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(tcp, 0);
  ASSERT_GE(tcp6, 0);
  EXPECT_EQ(rmsg_is_managed(tcp), 1);
  EXPECT_EQ(rmsg_is_managed(tcp6), 1);
  EXPECT_EQ(rmsg_is_managed(udp), 0);
  EXPECT_EQ(rmsg_is_managed(unix_stream), 0);
  EXPECT_EQ(rmsg_fcntl(tcp, F_GETFL) & O_NONBLOCK, O_NONBLOCK);  // the flags still apply
  for (int fd : {tcp, tcp6, udp, unix_stream}) EXPECT_EQ(rmsg_close(fd), 0);
  EXPECT_EQ(rmsg_is_managed(tcp), 0);
}

TEST(PosixApi, ErrorsAreTheKernelsWithErrno) {
  errno = 0;
  EXPECT_EQ(rmsg_socket(AF_INET, 12345, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rmsg_close(-1), -1);
  EXPECT_EQ(errno, EBADF);
  char c;
  EXPECT_EQ(rmsg_read(-1, &c, 1), -1);
  EXPECT_EQ(errno, EBADF);
  int fd = rmsg_socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(rmsg_send(fd, "x", 1, MSG_NOSIGNAL), -1);  // not connected
  EXPECT_EQ(errno, EPIPE);
  EXPECT_EQ(rmsg_close(fd), 0);
}

TEST(PosixApi, DuplicatesShareTheConnectionUntilTheLastCloses) {
  Pair p = connected_pair();
  int d = rmsg_dup(p.a);
  int d2 = rmsg_fcntl(p.a, F_DUPFD_CLOEXEC, 0);
  int d3 = rmsg_dup2(p.a, 150);
  ASSERT_EQ(d3, 150);
  for (int fd : {d, d2, d3}) EXPECT_EQ(rmsg_is_managed(fd), 1);
  EXPECT_EQ(rmsg_close(p.a), 0);
  EXPECT_EQ(rmsg_is_managed(p.a), 0);
  EXPECT_EQ(rmsg_write(d3, "ab", 2), 2);
  char buf[4];
  EXPECT_EQ(rmsg_recv(p.b, buf, 2, MSG_WAITALL), 2);
  for (int fd : {d, d2, d3}) EXPECT_EQ(rmsg_close(fd), 0);
  EXPECT_EQ(rmsg_read(p.b, buf, sizeof buf), 0);  // the last close closed it: EOF
  EXPECT_EQ(rmsg_close(p.b), 0);
}

TEST(PosixApi, CloseRangeForgetsWhatItClosed) {
  Pair p = connected_pair();
  int low = p.a < p.b ? p.a : p.b;
  int high = p.a < p.b ? p.b : p.a;
  EXPECT_EQ(rmsg_close_range(static_cast<unsigned>(low), static_cast<unsigned>(high), 0), 0);
  EXPECT_EQ(rmsg_is_managed(p.a), 0);
  EXPECT_EQ(rmsg_is_managed(p.b), 0);
  EXPECT_EQ(rmsg_fcntl(p.a, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST(PosixApi, EpollInstancesAndTheirDuplicates) {
  Pair p = connected_pair();
  int ep = rmsg_epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = 77;
  EXPECT_EQ(rmsg_epoll_ctl(ep, EPOLL_CTL_ADD, p.b, &e), 0);
  EXPECT_EQ(rmsg_epoll_ctl(ep, EPOLL_CTL_ADD, p.b, &e), -1);
  EXPECT_EQ(errno, EEXIST);
  int ep2 = rmsg_dup(ep);  // the same instance under a second number
  EXPECT_EQ(rmsg_write(p.a, "x", 1), 1);
  epoll_event got[2];
  ASSERT_EQ(rmsg_epoll_wait(ep2, got, 2, 5000), 1);
  EXPECT_EQ(got[0].data.u64, 77u);
  EXPECT_EQ(rmsg_epoll_ctl(ep2, EPOLL_CTL_DEL, p.b, nullptr), 0);
  EXPECT_EQ(rmsg_epoll_wait(ep, got, 2, 0), 0);
  for (int fd : {ep, ep2, p.a, p.b}) EXPECT_EQ(rmsg_close(fd), 0);
}

// What a later RDMA upgrade needs to re-register a number in every set that watches it.
TEST(PosixApi, EpollRegistrationsAreRecordedPerSet) {
  using rmsg::posix::seams::Registration;
  using rmsg::posix::seams::registrations;
  Pair p = connected_pair();
  int ep1 = rmsg_epoll_create1(0);
  int ep2 = rmsg_epoll_create(8);
  epoll_event e{};
  e.events = EPOLLIN | EPOLLET;
  e.data.u64 = 0x1234567890ull;
  ASSERT_EQ(rmsg_epoll_ctl(ep1, EPOLL_CTL_ADD, p.b, &e), 0);
  e.events = EPOLLOUT | EPOLLONESHOT;
  e.data.u64 = 5;
  ASSERT_EQ(rmsg_epoll_ctl(ep2, EPOLL_CTL_ADD, p.b, &e), 0);
  Registration r[4];
  ASSERT_EQ(registrations(p.b, r, 4), 2);
  EXPECT_EQ(r[0].epoll_fd, ep1);
  EXPECT_EQ(r[0].events, static_cast<std::uint32_t>(EPOLLIN | EPOLLET));
  EXPECT_EQ(r[0].data, 0x1234567890ull);
  EXPECT_EQ(r[1].epoll_fd, ep2);
  EXPECT_EQ(r[1].data, 5u);
  e.events = EPOLLIN;
  e.data.u64 = 6;
  ASSERT_EQ(rmsg_epoll_ctl(ep2, EPOLL_CTL_MOD, p.b, &e), 0);
  ASSERT_EQ(registrations(p.b, r, 4), 2);
  EXPECT_EQ(r[1].events, static_cast<std::uint32_t>(EPOLLIN));
  EXPECT_EQ(r[1].data, 6u);
  // A failed call records nothing; DEL forgets; a closed set's entries are gone.
  EXPECT_EQ(rmsg_epoll_ctl(ep2, EPOLL_CTL_ADD, p.b, &e), -1);
  ASSERT_EQ(rmsg_epoll_ctl(ep1, EPOLL_CTL_DEL, p.b, nullptr), 0);
  ASSERT_EQ(registrations(p.b, r, 4), 1);
  EXPECT_EQ(r[0].epoll_fd, ep2);
  EXPECT_EQ(rmsg_close(ep2), 0);
  EXPECT_EQ(registrations(p.b, r, 4), 0);
  // A third set fits (slots freed); unmanaged descriptors have none.
  int ep3 = rmsg_epoll_create1(0);
  ASSERT_EQ(rmsg_epoll_ctl(ep3, EPOLL_CTL_ADD, p.b, &e), 0);
  EXPECT_EQ(registrations(p.b, r, 4), 1);
  EXPECT_EQ(registrations(ep3, r, 4), -1);
  for (int fd : {ep1, ep3, p.a, p.b}) EXPECT_EQ(rmsg_close(fd), 0);
}

TEST(PosixApi, MoreSetsThanSlotsMarkTheRegistrationsIncomplete) {
  using rmsg::posix::seams::Registration;
  using rmsg::posix::seams::registrations;
  Pair p = connected_pair();
  int sets[3];
  epoll_event e{};
  e.events = EPOLLIN;
  for (int& ep : sets) {
    ep = rmsg_epoll_create1(0);
    ASSERT_EQ(rmsg_epoll_ctl(ep, EPOLL_CTL_ADD, p.b, &e), 0);  // the kernel takes all three
  }
  Registration r[4];
  EXPECT_EQ(registrations(p.b, r, 4), -1);  // an upgrade must refuse this number
  for (int ep : sets) EXPECT_EQ(rmsg_close(ep), 0);
  EXPECT_EQ(rmsg_close(p.a), 0);
  EXPECT_EQ(rmsg_close(p.b), 0);
}

// A set closed without EPOLL_CTL_DEL takes its registrations with it: the places they
// held are free for the next sets (an upgrade would refuse a number marked incomplete).
TEST(PosixApi, ClosedSetsRegistrationsExpire) {
  using rmsg::posix::seams::Registration;
  using rmsg::posix::seams::registrations;
  Pair p = connected_pair();
  epoll_event e{};
  e.events = EPOLLIN;
  for (int round = 0; round < 3; ++round) {
    int ep = rmsg_epoll_create1(0);
    int kept = rmsg_dup(ep);  // the set lives on under its other number
    ASSERT_EQ(rmsg_epoll_ctl(ep, EPOLL_CTL_ADD, p.b, &e), 0);
    EXPECT_EQ(rmsg_close(ep), 0);
    Registration r[4];
    ASSERT_EQ(registrations(p.b, r, 4), 1) << "round " << round;
    EXPECT_EQ(r[0].epoll_fd, kept);
    EXPECT_EQ(rmsg_close(kept), 0);
    EXPECT_EQ(registrations(p.b, r, 4), 0);
  }
  EXPECT_EQ(rmsg_close(p.a), 0);
  EXPECT_EQ(rmsg_close(p.b), 0);
}

std::string peer_of(const char* text, std::uint16_t port) {
  sockaddr_in6 a{};
  if (inet_pton(AF_INET6, text, &a.sin6_addr) == 1) {
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
  } else {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    EXPECT_EQ(inet_pton(AF_INET, text, &v4.sin_addr), 1) << text;
    std::memcpy(&a, &v4, sizeof v4);
  }
  return rmsg::posix::seams::peer_text(a);
}

TEST(PosixStats, PeerTextIsRfc5952) {
  EXPECT_EQ(peer_of("127.0.0.1", 5201), "\"127.0.0.1:5201\"");
  EXPECT_EQ(peer_of("255.0.10.1", 1), "\"255.0.10.1:1\"");
  EXPECT_EQ(peer_of("::1", 80), "\"[::1]:80\"");
  EXPECT_EQ(peer_of("::", 80), "\"[::]:80\"");
  EXPECT_EQ(peer_of("1::", 80), "\"[1::]:80\"");
  EXPECT_EQ(peer_of("fe80::1:2", 9), "\"[fe80::1:2]:9\"");
  EXPECT_EQ(peer_of("2001:db8:0:0:1:0:0:1", 9), "\"[2001:db8::1:0:0:1]:9\"");     // first run
  EXPECT_EQ(peer_of("2001:db8:0:1:1:1:1:1", 9), "\"[2001:db8:0:1:1:1:1:1]:9\"");  // no "::" for one
  EXPECT_EQ(peer_of("::ffff:10.1.2.3", 7), "\"[::ffff:10.1.2.3]:7\"");
  sockaddr_in6 none{};
  EXPECT_EQ(rmsg::posix::seams::peer_text(none), "null");
  // Random addresses (with zero groups likely) against the C library's inet_ntop.
  auto rng = rmsg::testing::test_rng("ipv6");
  for (int i = 0; i < 2000; ++i) {
    unsigned char b[16];
    for (int k = 0; k < 16; k += 2) {
      bool zero = rng() % 2 == 0;
      b[k] = zero ? 0 : static_cast<unsigned char>(rng());
      b[k + 1] = zero ? 0 : static_cast<unsigned char>(rng());
    }
    const unsigned char mapped_or_compat[10] = {};
    if (std::memcmp(b, mapped_or_compat, 10) == 0) continue;  // inet_ntop's ::a.b.c.d forms
    char text[INET6_ADDRSTRLEN];
    ASSERT_NE(inet_ntop(AF_INET6, b, text, sizeof text), nullptr);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    std::memcpy(&a.sin6_addr, b, 16);
    a.sin6_port = htons(443);
    EXPECT_EQ(rmsg::posix::seams::peer_text(a), "\"[" + std::string(text) + "]:443\"");
  }
}

}  // namespace
