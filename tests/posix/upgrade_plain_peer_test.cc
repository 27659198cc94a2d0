// Nothing added for a plain peer (docs/socket-shim.md, "The RDMA upgrade"): with the upgrade
// engine linked in and RMSG_UPGRADE=on, a connection between a shimmed end (the C API) and
// a plain one (the kernel's calls) carries exactly the bytes of the same exchange between
// two plain ends. Each end records the TCP payload it received; the runs are compared byte
// for byte, each direction, with the shim on either side. On the host, which has no RDMA:
// the attempt ends with a reason and never touches the TCP connection.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "posix/seams.h"
#include "rmsg/socket.h"

namespace {

struct Calls {  // the shim's C API or the kernel's, per end
  bool shim;
  int socket(int d, int t, int p) const { return shim ? rmsg_socket(d, t, p) : ::socket(d, t, p); }
  ssize_t read(int fd, void* b, size_t n) const {
    return shim ? rmsg_read(fd, b, n) : ::read(fd, b, n);
  }
  ssize_t write(int fd, const void* b, size_t n) const {
    return shim ? rmsg_write(fd, b, n) : ::write(fd, b, n);
  }
  int close(int fd) const { return shim ? rmsg_close(fd) : ::close(fd); }
};

// The first IPv4 address of an interface that is up and not loopback (the engine then
// really tries rdma_cm), else 127.0.0.1 (it stops at `loopback`).
in_addr test_address() {
  in_addr a{htonl(INADDR_LOOPBACK)};
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return a;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    break;
  }
  freeifaddrs(list);
  return a;
}

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

bool write_all(const Calls& k, int fd, const std::string& s) {
  for (std::size_t off = 0; off < s.size();) {
    ssize_t w = k.write(fd, s.data() + off, std::min<std::size_t>(s.size() - off, 3000));
    if (w <= 0) return false;
    off += static_cast<std::size_t>(w);
  }
  return true;
}

std::string read_exactly(const Calls& k, int fd, std::size_t n) {
  std::string got;
  char buf[4096];
  while (got.size() < n) {
    ssize_t r = k.read(fd, buf, std::min(sizeof buf, n - got.size()));
    if (r <= 0) break;
    got.append(buf, static_cast<std::size_t>(r));
  }
  return got;
}

std::string read_to_eof(const Calls& k, int fd) {
  std::string got;
  char buf[4096];
  for (ssize_t r; (r = k.read(fd, buf, sizeof buf)) > 0;)
    got.append(buf, static_cast<std::size_t>(r));
  return got;
}

struct Capture {
  std::string at_server;  // the TCP payload the acceptor received
  std::string at_client;  // and the connector
  std::string client_fallback, server_fallback;
};

// A request/response exchange of a few sizes, then the client's end of stream.
Capture run(bool shim_client, bool shim_server) {
  Calls client{shim_client}, server{shim_server};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr = test_address();
  int l = server.socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(shim_server ? rmsg_bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr)
                        : ::bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr),
            0);
  EXPECT_EQ(shim_server ? rmsg_listen(l, 4) : ::listen(l, 4), 0);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  Capture cap;
  std::thread srv([&] {
    int c = shim_server ? rmsg_accept(l, nullptr, nullptr) : ::accept(l, nullptr, nullptr);
    for (std::size_t n : {1u, 64u, 1000u, 70000u}) {
      std::string req = read_exactly(server, c, n);
      cap.at_server += req;
      EXPECT_TRUE(write_all(server, c, pattern(n * 2, static_cast<unsigned>(n))));
    }
    cap.at_server += read_to_eof(server, c);
    cap.server_fallback = rmsg::posix::seams::upgrade_view(c).fallback;
    server.close(c);
  });
  int c = client.socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(shim_client ? rmsg_connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr)
                        : ::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr),
            0);
  for (std::size_t n : {1u, 64u, 1000u, 70000u}) {
    EXPECT_TRUE(write_all(client, c, pattern(n, static_cast<unsigned>(n + 7))));
    cap.at_client += read_exactly(client, c, n * 2);
  }
  EXPECT_TRUE(write_all(client, c, pattern(300000, 99)));
  EXPECT_EQ(shim_client ? rmsg_shutdown(c, SHUT_WR) : ::shutdown(c, SHUT_WR), 0);
  srv.join();
  cap.at_client += read_to_eof(client, c);
  // The attempt's reason (it ends on its own: no device, a reject, or the deadline).
  for (int i = 0; shim_client && i < 5000; ++i) {
    cap.client_fallback = rmsg::posix::seams::upgrade_view(c).fallback;
    if (cap.client_fallback != "pending") break;
    pollfd none{-1, 0, 0};
    ::poll(&none, 1, 1);
  }
  client.close(c);
  server.close(l);
  return cap;
}

TEST(ShimUpgradeHost, APlainPeerSeesExactlyTheBytesOfAPlainRun) {
  setenv("RMSG_UPGRADE", "on", 1);
  Capture plain = run(false, false);
  ASSERT_EQ(plain.at_server.size(), 1u + 64 + 1000 + 70000 + 300000);
  Capture shim_client = run(true, false);
  Capture shim_server = run(false, true);
  EXPECT_TRUE(shim_client.at_server == plain.at_server) << shim_client.at_server.size();
  EXPECT_TRUE(shim_client.at_client == plain.at_client) << shim_client.at_client.size();
  EXPECT_TRUE(shim_server.at_server == plain.at_server) << shim_server.at_server.size();
  EXPECT_TRUE(shim_server.at_client == plain.at_client) << shim_server.at_client.size();
  // Each shimmed end says why it stayed on TCP.
  EXPECT_NE(shim_client.client_fallback, "none");
  EXPECT_NE(shim_client.client_fallback, "pending");
  EXPECT_EQ(shim_server.server_fallback, "peer");
  std::printf("connector to a plain peer: fallback %s\n", shim_client.client_fallback.c_str());
}

}  // namespace
