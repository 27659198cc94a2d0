/* 64 B ping-pong over loopback TCP through rmsg's C API (rmsg/socket.h) or the C library's
 * calls, alternating rounds in one process: the "C API" column of bench/shim_cost.sh.
 * Written in C to show the API is usable from C. Same protocol as rmsg-perf's posix runner:
 * blocking sockets, TCP_NODELAY, an echo thread; reports the one-way time (half a round
 * trip) per message, median and p99 of each round.
 *   capi_pingpong [ROUNDS] [ITERS]    prints: "capi|libc ROUND MEDIAN_US P99_US" per round
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rmsg/socket.h"

enum { kSize = 64 };

struct Api {
  const char* name;
  int (*socket)(int, int, int);
  int (*bind)(int, const struct sockaddr*, socklen_t);
  int (*listen)(int, int);
  int (*accept)(int, struct sockaddr*, socklen_t*);
  int (*connect)(int, const struct sockaddr*, socklen_t);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*recv)(int, void*, size_t, int);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*getsockname)(int, struct sockaddr*, socklen_t*);
  int (*close)(int);
};

static const struct Api kApis[2] = {
    {"capi", rmsg_socket, rmsg_bind, rmsg_listen, rmsg_accept, rmsg_connect, rmsg_send, rmsg_recv,
     rmsg_setsockopt, rmsg_getsockname, rmsg_close},
    {"libc", socket, bind, listen, accept, connect, send, recv, setsockopt, getsockname, close},
};

static int exact(const struct Api* api, int fd, char* buf, int sending) {
  size_t done = 0;
  while (done < kSize) {
    ssize_t n = sending ? api->send(fd, buf + done, kSize - done, MSG_NOSIGNAL)
                        : api->recv(fd, buf + done, kSize - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

struct Echo {
  const struct Api* api;
  int listener;
};

static void* echo_thread(void* arg) {
  const struct Echo* e = arg;
  int fd = e->api->accept(e->listener, NULL, NULL);
  if (fd < 0) return NULL;
  const int one = 1;
  e->api->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char buf[kSize];
  while (exact(e->api, fd, buf, 0) == 0 && exact(e->api, fd, buf, 1) == 0) {
  }
  e->api->close(fd);
  return NULL;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* One round: a connection, ITERS timed round trips after a warm-up; 0 on success. */
static int round_trip(const struct Api* api, int iters, double* median_us, double* p99_us) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  struct Echo e = {api, api->socket(AF_INET, SOCK_STREAM, 0)};
  if (e.listener < 0 || api->bind(e.listener, (struct sockaddr*)&a, sizeof a) < 0 ||
      api->listen(e.listener, 1) < 0 || api->getsockname(e.listener, (struct sockaddr*)&a, &len))
    return -1;
  pthread_t t;
  if (pthread_create(&t, NULL, echo_thread, &e) != 0) return -1;
  int fd = api->socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  if (fd < 0 || api->connect(fd, (struct sockaddr*)&a, sizeof a) < 0) return -1;
  api->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char buf[kSize];
  memset(buf, 0x5a, sizeof buf);
  double* samples = malloc(sizeof(double) * (size_t)iters);
  int rc = samples ? 0 : -1;
  for (int i = -iters / 10; rc == 0 && i < iters; ++i) {
    const double start = now_ns();
    if (exact(api, fd, buf, 1) || exact(api, fd, buf, 0)) rc = -1;
    if (i >= 0) samples[i] = (now_ns() - start) / 2e3;
  }
  api->close(fd);
  pthread_join(t, NULL);
  api->close(e.listener);
  if (rc == 0) {
    qsort(samples, (size_t)iters, sizeof(double), by_value);
    *median_us = samples[iters / 2];
    *p99_us = samples[(int)(iters * 0.99)];
  }
  free(samples);
  return rc;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 5;
  const int iters = argc > 2 ? atoi(argv[2]) : 20000;
  if (rounds < 1 || iters < 100) return 2;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      const struct Api* api = &kApis[(r + k) % 2]; /* alternate which goes first */
      double median = 0, p99 = 0;
      if (round_trip(api, iters, &median, &p99) != 0) {
        fprintf(stderr, "capi_pingpong: %s round %d failed: %s\n", api->name, r, strerror(errno));
        return 1;
      }
      printf("%s %d %.3f %.3f\n", api->name, r, median, p99);
      fflush(stdout);
    }
  }
  return 0;
}
