/* A plain program (it never links rmsg) for the upgrade under rmsg-run: a client and a
 * server that ping-pong 64-byte messages for a while (long enough for the upgrade to cut
 * over), then move a bulk pattern each way, every byte checked; the server waits in poll()
 * before each read. Exit status 0 when every byte was right.
 *   upgrade_probe server ADDR [END]    prints the port, serves one connection; END says
 *                                      what it does after its last byte: "close" (default)
 *                                      closes and exits at once, "open" exits holding the
 *                                      connection, "stdin" closes and stays until its
 *                                      standard input ends
 *   upgrade_probe client ADDR PORT MS  ping-pongs for MS milliseconds, then the bulk;
 *                                      MS "stdin": until its standard input ends */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BULK_UP (3u << 20)
#define BULK_DOWN (2u << 20)

static unsigned char byte_at(unsigned seed, size_t i) {
  return (unsigned char)((i * 2654435761u + seed) >> 13);
}

static int write_all(int fd, const unsigned char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_full(int fd, unsigned char* p, size_t n, int use_poll) {
  while (n > 0) {
    if (use_poll) {
      struct pollfd pf = {fd, POLLIN, 0};
      if (poll(&pf, 1, 30000) != 1) return -1;
    }
    ssize_t r = read(fd, p, n);
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Sends (seed) pattern of n bytes in pieces. */
static int send_pattern(int fd, unsigned seed, size_t n) {
  unsigned char buf[8192];
  for (size_t off = 0; off < n;) {
    size_t k = n - off < sizeof buf ? n - off : sizeof buf;
    for (size_t i = 0; i < k; ++i) buf[i] = byte_at(seed, off + i);
    if (write_all(fd, buf, k) != 0) return -1;
    off += k;
  }
  return 0;
}

/* Reads exactly n pattern bytes, then expects end of stream. */
static int check_pattern(int fd, unsigned seed, size_t n, int use_poll) {
  unsigned char buf[8192];
  for (size_t off = 0; off < n;) {
    size_t k = n - off < sizeof buf ? n - off : sizeof buf;
    if (read_full(fd, buf, k, use_poll) != 0) return -1;
    for (size_t i = 0; i < k; ++i) {
      if (buf[i] != byte_at(seed, off + i)) {
        fprintf(stderr, "byte %zu differs\n", off + i);
        return -1;
      }
    }
    off += k;
  }
  return read(fd, buf, 1) == 0 ? 0 : -1;
}

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) return 2;
  unsigned char msg[64];
  if (strcmp(argv[1], "server") == 0) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof a;
    if (bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, 4) != 0 ||
        getsockname(l, (struct sockaddr*)&a, &len) != 0) {
      return 3;
    }
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    int c = accept(l, NULL, NULL);
    for (;;) { /* echo until the end marker */
      if (read_full(c, msg, sizeof msg, 1) != 0) return 4;
      if (write_all(c, msg, sizeof msg) != 0) return 5;
      if (msg[0] == 0xff) break;
    }
    if (check_pattern(c, 1, BULK_UP, 1) != 0) return 6;
    if (send_pattern(c, 2, BULK_DOWN) != 0) return 7;
    /* Exit at once after the last write, as many servers do: the bytes still in flight
     * must reach the client as the kernel would deliver them (the connection closed by
     * the exit itself with "open"). */
    const char* end = argc > 3 ? argv[3] : "close";
    if (strcmp(end, "open") == 0) return 0;
    close(c);
    close(l);
    if (strcmp(end, "stdin") == 0) {
      char b;
      while (read(0, &b, 1) > 0) {
      }
    }
    return 0;
  }
  if (argc < 5) return 2;
  a.sin_port = htons((unsigned short)atoi(argv[3]));
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(c, (struct sockaddr*)&a, sizeof a) != 0) return 3;
  int until_stdin = strcmp(argv[4], "stdin") == 0;
  long long until = until_stdin ? 0 : now_ms() + atoll(argv[4]);
  long rounds = 0;
  for (int last = 0; !last; ++rounds) {
    if (until_stdin) {
      struct pollfd in = {0, POLLIN, 0};
      last = poll(&in, 1, 0) == 1; /* a line or end of input: go on to the bulk */
    } else {
      last = now_ms() >= until;
    }
    memset(msg, (int)(rounds & 0x7f), sizeof msg);
    if (last) msg[0] = 0xff;
    unsigned char back[64];
    if (write_all(c, msg, sizeof msg) != 0 || read_full(c, back, sizeof back, 0) != 0) return 4;
    if (memcmp(msg, back, sizeof msg) != 0) return 5;
  }
  if (send_pattern(c, 1, BULK_UP) != 0 || shutdown(c, SHUT_WR) != 0) return 6;
  if (check_pattern(c, 2, BULK_DOWN, 0) != 0) return 7;
  printf("rounds %ld\n", rounds);
  close(c);
  return 0;
}
