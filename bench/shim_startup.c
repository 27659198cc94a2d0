/* Start-up cost of the socket shim (docs/perf.md, "Socket shim start-up"): fork+exec of
 * a program (default: bash -c /bin/true, two images that each load the shim), plain and
 * with LD_PRELOAD=LIB_A and LD_PRELOAD=LIB_B (say the library before and after a change),
 * in rotating order on CPU 1, after 60 warm-up spawns. Prints the median, p99 and minimum
 * wall-clock time per spawn of each. Built by hand:
 *   cc -O2 -o shim_startup bench/shim_startup.c
 *   ./shim_startup OLD/librmsg-preload.so build/lib/librmsg-preload.so 5000 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static double spawn(char** argv, char** envp) {
  double t0 = now_us();
  pid_t p = fork();
  if (p == 0) {
    execve(argv[0], argv, envp);
    _exit(127);
  }
  int st;
  waitpid(p, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "child failed\n");
    exit(1);
  }
  return now_us() - t0;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void report(const char* what, double* v, int n) {
  qsort(v, n, sizeof *v, cmp);
  printf("%-6s median %7.1f us  p99 %7.1f us  min %7.1f us\n", what, v[n / 2], v[(n * 99) / 100],
         v[0]);
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  int rounds = atoi(argv[3]);
  char* def[] = {"/bin/bash", "-c", "/bin/true", NULL};
  char** prog = argc > 4 ? argv + 4 : def;
  char pa[4096], pb[4096];
  snprintf(pa, sizeof pa, "LD_PRELOAD=%s", argv[1]);
  snprintf(pb, sizeof pb, "LD_PRELOAD=%s", argv[2]);
  char* envs[3][3] = {{"PATH=/usr/bin:/bin", NULL, NULL}, {"PATH=/usr/bin:/bin", pa, NULL},
                      {"PATH=/usr/bin:/bin", pb, NULL}};
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(1, &one);
  sched_setaffinity(0, sizeof one, &one);
  double* v[3];
  for (int k = 0; k < 3; ++k) v[k] = calloc(rounds, sizeof(double));
  for (int i = 0; i < 60; ++i) spawn(prog, envs[i % 3]);
  for (int i = 0; i < rounds; ++i) {
    for (int j = 0; j < 3; ++j) {
      int k = (i + j) % 3;  /* rotate who goes first */
      v[k][i] = spawn(prog, envs[k]);
    }
  }
  report("plain", v[0], rounds);
  report("A", v[1], rounds);
  report("B", v[2], rounds);
  return 0;
}
