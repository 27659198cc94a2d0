// Many concurrent connections on one loop thread: 512 clients and their 512 accepted
// peers, each echoing a distinct message.
#include <sys/resource.h>

#include <memory>
#include <string>
#include <vector>

#include "kit/tcp_fixture.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
using testing::TcpTest;

constexpr int kConnections = 512;
constexpr std::size_t kMessage = 4096;

// Two descriptors per connection plus the loop's and the test runner's.
bool ensure_fd_limit(rlim_t need) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  if (lim.rlim_cur >= need) return true;
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) return false;
  lim.rlim_cur = need;
  return ::setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

// Reads or writes one fixed-size message, resuming across readiness callbacks.
struct Endpoint {
  Stream stream;
  std::string out;  // what to send
  std::string in;   // what arrived
  std::size_t sent = 0;
  std::error_code error;
};

std::string message_for(int i) {
  std::string m(kMessage, '\0');
  for (std::size_t k = 0; k < kMessage; ++k) m[k] = static_cast<char>('a' + (i * 31 + k) % 26);
  return m;
}

// Level-triggered pumping: write what is left, read what is there.
void pump(Endpoint& e) {
  while (e.sent < e.out.size()) {
    auto n = e.stream.write(e.out.data() + e.sent, e.out.size() - e.sent);
    if (!n) {
      if (!n.is(Errc::would_block)) e.error = n.error();
      break;
    }
    e.sent += *n;
  }
  if (e.sent == e.out.size()) e.stream.on_writable({});
  char buf[kMessage];
  auto n = e.stream.read(buf, sizeof buf);
  if (n.ok()) e.in.append(buf, *n);
  if (!n.ok() && !n.is(Errc::would_block)) e.error = n.error();
}

void start(Endpoint& e) {
  e.stream.on_readable([&e] { pump(e); });
  e.stream.on_writable([&e] { pump(e); });
}

TEST_F(TcpTest, FiveHundredTwelveConcurrentConnectionsOnOneLoop) {
  ASSERT_TRUE(ensure_fd_limit(2 * kConnections + 64)) << "RLIMIT_NOFILE too low";
  std::vector<std::unique_ptr<Endpoint>> servers;
  auto l = tcp_listen(loop(), loopback(), {}, [&](Stream s) {
    // The server echoes: it sends back what the client sent, once all of it arrived.
    servers.push_back(std::make_unique<Endpoint>());
    auto& e = *servers.back();
    e.stream = std::move(s);
    e.stream.on_readable([&e] {
      char buf[kMessage];
      auto n = e.stream.read(buf, sizeof buf);
      if (n.ok()) e.in.append(buf, *n);
      if (!n.ok() && !n.is(Errc::would_block)) e.error = n.error();
      if (e.in.size() == kMessage) {
        e.out = e.in;
        start(e);
      }
    });
  });
  ASSERT_TRUE(l.ok()) << l.error().message();

  std::vector<std::unique_ptr<Endpoint>> clients(kConnections);
  int connected = 0;
  int failed = 0;
  for (int i = 0; i < kConnections; ++i) {
    clients[i] = std::make_unique<Endpoint>();
    clients[i]->out = message_for(i);
    tcp_connect(loop(), loopback(l->port()), {}, [&, i](Result<Stream> r) {
      if (!r.ok()) {
        ADD_FAILURE() << "connect " << i << ": " << r.error().message();
        ++failed;
        return;
      }
      ++connected;
      clients[i]->stream = std::move(r).value();
      start(*clients[i]);
    });
  }
  auto all_echoed = [&] {
    if (failed > 0) return true;
    for (auto& c : clients) {
      if (c->error || c->in.size() < kMessage) return c->error.operator bool();
    }
    return true;
  };
  ASSERT_TRUE(loop().run_for(all_echoed, 60s))
      << "connected " << connected << ", accepted " << servers.size();
  EXPECT_EQ(connected, kConnections);
  EXPECT_EQ(servers.size(), static_cast<std::size_t>(kConnections));
  for (int i = 0; i < kConnections; ++i) {
    EXPECT_FALSE(clients[i]->error) << i << ": " << clients[i]->error.message();
    EXPECT_EQ(clients[i]->in, clients[i]->out) << "connection " << i;
  }
  for (auto& s : servers) EXPECT_FALSE(s->error) << s->error.message();
}

}  // namespace
}  // namespace rmsg
