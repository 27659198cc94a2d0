/* rmsg/socket.h from C: every call of the API once over a real loopback connection, with
 * the kernel's answers (errno included). Exits 0 when every check held. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "rmsg/socket.h"

#define CHECK(cond)                                                                              \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, __LINE__, #cond, errno); \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int main(void) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int l = rmsg_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(l >= 0 && rmsg_is_managed(l) == 1);
  CHECK(rmsg_bind(l, (struct sockaddr*)&a, sizeof a) == 0);
  CHECK(rmsg_listen(l, 4) == 0);
  CHECK(rmsg_getsockname(l, (struct sockaddr*)&a, &len) == 0);

  /* Non-blocking connect: POLLOUT once it completes, SO_ERROR 0. */
  int c = rmsg_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int rc = rmsg_connect(c, (struct sockaddr*)&a, len);
  CHECK(rc == 0 || errno == EINPROGRESS);
  struct pollfd p = {c, POLLOUT, 0};
  CHECK(rmsg_poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT));
  int err = -1;
  socklen_t el = sizeof err;
  CHECK(rmsg_getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
  CHECK(rmsg_fcntl(c, F_SETFL, 0) == 0);
  struct sockaddr_in peer;
  socklen_t pl = sizeof peer;
  int s = rmsg_accept4(l, (struct sockaddr*)&peer, &pl, SOCK_CLOEXEC);
  CHECK(s >= 0 && rmsg_is_managed(s) == 1);
  CHECK(rmsg_getpeername(c, (struct sockaddr*)&peer, &pl) == 0 && peer.sin_port == a.sin_port);
  int one = 1;
  CHECK(rmsg_setsockopt(c, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one) == 0);

  /* Data, each call once. */
  char buf[64];
  CHECK(rmsg_send(c, "hello", 5, MSG_NOSIGNAL) == 5);
  CHECK(rmsg_recv(s, buf, 5, MSG_WAITALL) == 5 && memcmp(buf, "hello", 5) == 0);
  struct iovec v[2] = {{"ab", 2}, {"cd", 2}};
  CHECK(rmsg_writev(c, v, 2) == 4);
  int queued = 0;
  for (int i = 0; i < 1000 && queued < 4; ++i) CHECK(rmsg_ioctl(s, FIONREAD, &queued) == 0);
  CHECK(queued == 4);
  struct iovec rv = {buf, 4};
  CHECK(rmsg_readv(s, &rv, 1) == 4 && memcmp(buf, "abcd", 4) == 0);
  struct msghdr m;
  memset(&m, 0, sizeof m);
  struct iovec mv = {"xyz", 3};
  m.msg_iov = &mv;
  m.msg_iovlen = 1;
  CHECK(rmsg_sendmsg(c, &m, 0) == 3);
  struct iovec rmv = {buf, 3};
  m.msg_iov = &rmv;
  CHECK(rmsg_recvmsg(s, &m, MSG_WAITALL) == 3 && memcmp(buf, "xyz", 3) == 0);
  CHECK(rmsg_sendto(s, "12", 2, 0, NULL, 0) == 2);
  CHECK(rmsg_recvfrom(c, buf, 2, MSG_WAITALL, NULL, NULL) == 2);
  CHECK(rmsg_write(s, "w", 1) == 1);
  CHECK(rmsg_read(c, buf, sizeof buf) == 1 && buf[0] == 'w');
  int zero = open("/dev/zero", O_RDONLY);
  off_t off = 0;
  CHECK(rmsg_sendfile(c, zero, &off, 8) == 8);
  close(zero);
  CHECK(rmsg_recv(s, buf, 8, MSG_WAITALL) == 8 && buf[7] == 0);

  /* Readiness through each call. */
  CHECK(rmsg_write(c, "r", 1) == 1);
  struct timespec t = {5, 0};
  p.fd = s;
  p.events = POLLIN;
  CHECK(rmsg_ppoll(&p, 1, &t, NULL) == 1 && (p.revents & POLLIN));
  fd_set r;
  FD_ZERO(&r);
  FD_SET(s, &r);
  struct timeval tv = {5, 0};
  CHECK(rmsg_select(s + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(s, &r));
  FD_ZERO(&r);
  FD_SET(s, &r);
  CHECK(rmsg_pselect(s + 1, &r, NULL, NULL, &t, NULL) == 1);
  int ep = rmsg_epoll_create1(EPOLL_CLOEXEC);
  int ep_old = rmsg_epoll_create(4);
  struct epoll_event e = {EPOLLIN, {.u64 = 3}};
  CHECK(rmsg_epoll_ctl(ep, EPOLL_CTL_ADD, s, &e) == 0);
  struct epoll_event got;
  CHECK(rmsg_epoll_wait(ep, &got, 1, 5000) == 1 && got.data.u64 == 3);
  CHECK(rmsg_epoll_pwait(ep, &got, 1, 0, NULL) == 1);
  CHECK(rmsg_read(s, buf, 1) == 1);
  CHECK(rmsg_epoll_wait(ep, &got, 1, 0) == 0);

  /* Descriptors: duplicates share the connection; the last close closes it. */
  int d1 = rmsg_dup(c);
  int d2 = rmsg_dup2(c, 60);
  int d3 = rmsg_dup3(c, 61, O_CLOEXEC);
  CHECK(d1 >= 0 && d2 == 60 && d3 == 61 && rmsg_is_managed(d3) == 1);
  CHECK(rmsg_close(c) == 0 && rmsg_is_managed(c) == 0);
  CHECK(rmsg_write(d1, "d", 1) == 1);
  CHECK(rmsg_close_range(60, 61, 0) == 0 && rmsg_is_managed(60) == 0);
  CHECK(rmsg_shutdown(d1, SHUT_WR) == 0);
  CHECK(rmsg_recv(s, buf, sizeof buf, 0) == 1);
  CHECK(rmsg_read(s, buf, sizeof buf) == 0); /* EOF after shutdown */
  rmsg_closefrom(d1);                        /* d1 and everything above it */
  CHECK(rmsg_close(d1) == -1 && errno == EBADF);
  CHECK(rmsg_close(s) == 0 || errno == EBADF);
  (void)ep_old;
  puts("c_api_test: every call answered as the kernel's");
  return 0;
}
