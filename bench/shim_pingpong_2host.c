/* 64 B ping-pong between two hosts through rmsg's C API (rmsg/socket.h) with the RDMA
 * upgrade engine linked in, or through the C library's calls (the kernel's TCP): the shim
 * columns of bench/shim_upgrade.sh. Blocking sockets, TCP_NODELAY; the client warms up
 * for WARM_MS (long enough for the upgrade to cut over; RMSG_STATS says whether it did),
 * then times ITERS round trips per round and reports the one-way time (half a round trip),
 * median and p99 of each round, and the process's CPU time (user + system, every thread)
 * per round trip.
 *   shim_pingpong_2host capi|libc server ADDR PORT
 *   shim_pingpong_2host capi|libc client ADDR PORT WARM_MS ROUNDS ITERS
 *     prints: "capi|libc ROUND MEDIAN_US P99_US CPU_US_PER_ROUND_TRIP" per round */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
  int (*close)(int);
};

static const struct Api kApis[2] = {
    {"capi", rmsg_socket, rmsg_bind, rmsg_listen, rmsg_accept, rmsg_connect, rmsg_send, rmsg_recv,
     rmsg_setsockopt, rmsg_close},
    {"libc", socket, bind, listen, accept, connect, send, recv, setsockopt, close},
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

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double cpu_us(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int serve(const struct Api* api, struct sockaddr_in* a) {
  int l = api->socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  api->setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (l < 0 || api->bind(l, (struct sockaddr*)a, sizeof *a) < 0 || api->listen(l, 1) < 0) return 3;
  int fd = api->accept(l, NULL, NULL);
  if (fd < 0) return 4;
  api->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char buf[kSize];
  while (exact(api, fd, buf, 0) == 0 && exact(api, fd, buf, 1) == 0) {
  }
  api->close(fd);
  api->close(l);
  return 0;
}

static int client(const struct Api* api, struct sockaddr_in* a, int warm_ms, int rounds,
                  int iters) {
  int fd = -1;
  for (double until = now_ns() + 120e9; now_ns() < until;) { /* the server guest may be late */
    fd = api->socket(AF_INET, SOCK_STREAM, 0);
    if (api->connect(fd, (struct sockaddr*)a, sizeof *a) == 0) break;
    api->close(fd);
    fd = -1;
    usleep(200000);
  }
  if (fd < 0) return 3;
  const int one = 1;
  api->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char buf[kSize];
  memset(buf, 0x5a, sizeof buf);
  for (double until = now_ns() + warm_ms * 1e6; now_ns() < until;) {
    if (exact(api, fd, buf, 1) || exact(api, fd, buf, 0)) return 4;
  }
  double* samples = malloc(sizeof(double) * (size_t)iters);
  if (samples == NULL) return 5;
  for (int r = 0; r < rounds; ++r) {
    const double cpu0 = cpu_us();
    for (int i = 0; i < iters; ++i) {
      const double start = now_ns();
      if (exact(api, fd, buf, 1) || exact(api, fd, buf, 0)) return 4;
      samples[i] = (now_ns() - start) / 2e3;
    }
    const double cpu = (cpu_us() - cpu0) / iters;
    qsort(samples, (size_t)iters, sizeof(double), by_value);
    printf("%s %d %.2f %.2f %.2f\n", api->name, r, samples[iters / 2],
           samples[(int)(iters * 0.99)], cpu);
    fflush(stdout);
  }
  free(samples);
  api->close(fd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  const struct Api* api = strcmp(argv[1], "capi") == 0 ? &kApis[0] : &kApis[1];
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[4]))};
  if (inet_pton(AF_INET, argv[3], &a.sin_addr) != 1) return 2;
  if (strcmp(argv[2], "server") == 0) return serve(api, &a);
  if (argc < 8) return 2;
  return client(api, &a, atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
}
