// What the socket shim's RDMA upgrade tests share (upgrade_test.cc, upgrade_readiness_test.cc):
// a fixture with a shimmed listener on the guest's RDMA address, and byte helpers. Both
// ends run in the test's process through the C API with RMSG_UPGRADE=on.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "posix/seams.h"
#include "rmsg/socket.h"

namespace rmsg::posix::testkit {

class ShimUpgrade : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("RMSG_UPGRADE", "on", 1);  // read once, at the engine's first use
    const char* a = std::getenv("RMSG_RDMA_ADDR");
    ASSERT_NE(a, nullptr) << "RMSG_RDMA_ADDR unset: run in the Soft-RoCE guest";
    addr_.sin_family = AF_INET;
    ASSERT_EQ(inet_pton(AF_INET, a, &addr_.sin_addr), 1);
  }

  // A shimmed listener on the RDMA address (port 0); its port in addr_.
  int shim_listen() {
    int l = rmsg_socket(AF_INET, SOCK_STREAM, 0);
    addr_.sin_port = 0;
    EXPECT_EQ(rmsg_bind(l, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
    EXPECT_EQ(rmsg_listen(l, 8), 0);
    socklen_t len = sizeof addr_;
    EXPECT_EQ(rmsg_getsockname(l, reinterpret_cast<sockaddr*>(&addr_), &len), 0);
    return l;
  }

  sockaddr_in addr_{};
};

inline std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

inline bool write_all(int fd, const unsigned char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = rmsg_write(fd, p, n < 7000 ? n : 7000);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Reads until end of stream, waiting in poll() before each read; the stream must end
// with end of stream (0), not an error.
inline std::vector<unsigned char> read_to_eof(int fd) {
  std::vector<unsigned char> got;
  unsigned char buf[10000];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(rmsg_poll(&p, 1, 20000), 1);  // a deadline, not a wait for an event
    ssize_t r = rmsg_read(fd, buf, sizeof buf);
    EXPECT_GE(r, 0) << std::strerror(errno);
    if (r <= 0) break;
    got.insert(got.end(), buf, buf + r);
  }
  return got;
}

// Until the connector's attempt has ended (a deadline, not a wait for an event).
inline bool attempt_over(int fd) {
  for (int i = 0; i < 10000; ++i) {
    if (seams::upgrade_view(fd).fallback != "pending") return true;
    pollfd none{-1, 0, 0};
    rmsg_poll(&none, 1, 1);
  }
  return false;
}

}  // namespace rmsg::posix::testkit
