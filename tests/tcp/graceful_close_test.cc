// Graceful close on TCP (rmsg/tcp.h): close() after shutdown_write() delivers every byte
// and the FIN, never a reset while the peer reads; the lingering socket belongs to the
// loop (tcp/tcp_linger.h), is released at the peer's EOF, aborted after the linger
// timeout or when the loop is destroyed. Without the linger each case below sees
// ECONNRESET: unread input, or SO_LINGER {1, 0}, makes the kernel send RST and drop the
// reply the client has not read yet.
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <random>
#include <vector>

#include "kit/pattern.h"
#include "kit/seed.h"
#include "kit/tcp_fixture.h"
#include "tcp/tcp_linger.h"

namespace rmsg {
namespace {

using namespace std::chrono_literals;
using testing::Pattern;
using testing::TcpTest;

constexpr std::size_t kRequest = 16;  // the request: "req <index, 12 digits>"

bool ensure_fd_limit(rlim_t need) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  if (lim.rlim_cur >= need) return true;
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) return false;
  lim.rlim_cur = need;
  return ::setrlimit(RLIMIT_NOFILE, &lim) == 0;
}

std::string request_for(std::size_t index) {
  std::string r = "req " + std::to_string(index);
  r.resize(kRequest, ' ');
  return r;
}

// Reads exactly the request (never what follows it), writes the reply, shuts its side
// down and closes at once: "read request, write reply, shutdown_write, close".
class Server {
 public:
  Server(Stream s, const Pattern& pattern, std::vector<std::size_t> sizes)
      : stream_(std::move(s)), pattern_(pattern), sizes_(std::move(sizes)) {
    stream_.on_readable([this] { read_request(); });
  }
  bool closed = false;
  std::error_code error;

 private:
  void read_request() {
    while (request_.size() < kRequest) {
      char buf[kRequest];
      auto n = stream_.read(buf, kRequest - request_.size());
      if (!n) {
        if (!n.is(Errc::would_block)) finish(n.error());
        return;
      }
      if (*n == 0) return finish(make_error_code(Errc::protocol_error));
      request_.append(buf, *n);
    }
    stream_.on_readable({});
    const std::size_t index = std::stoul(request_.substr(4));
    reply_size_ = index < sizes_.size() ? sizes_[index] : 0;
    offset_ = index * 7919;  // each reply its own piece of the pattern
    end_ = offset_ + reply_size_;
    stream_.on_writable([this] { write_reply(); });
  }
  void write_reply() {
    while (offset_ < end_) {
      auto n = stream_.write(pattern_.at(offset_, end_ - offset_));
      if (!n) {
        if (!n.is(Errc::would_block)) finish(n.error());
        return;
      }
      offset_ += *n;
    }
    auto r = stream_.shutdown_write();
    finish(r ? std::error_code{} : r.error());
  }
  void finish(std::error_code ec) {
    error = ec;
    closed = true;
    stream_.close();  // graceful after shutdown_write: the loop lingers
  }

  Stream stream_;
  const Pattern& pattern_;
  std::vector<std::size_t> sizes_;
  std::string request_;
  std::size_t reply_size_ = 0;
  std::uint64_t offset_ = 0, end_ = 0;
};

// Sends its request (and `trailing` bytes the server never reads), reads the reply to
// EOF, then shuts down and closes.
struct Client {
  Stream stream;
  std::uint64_t start = 0;
  std::size_t expect = 0;
  std::size_t got = 0;
  bool mismatch = false;
  bool eof = false;
  std::error_code error;
  bool finished() const { return eof || error; }
};

void run_client(Client& c, const Pattern& pattern, std::size_t index, std::size_t trailing) {
  std::string out = request_for(index) + std::string(trailing, 't');
  auto w = c.stream.write(out.data(), out.size());
  if (!w || *w != out.size()) {
    c.error = w ? make_error_code(Errc::would_block) : w.error();
    return;
  }
  c.stream.on_readable([&c, &pattern] {
    std::byte buf[32768];
    for (;;) {
      auto n = c.stream.read(buf, sizeof buf);
      if (!n) {
        if (!n.is(Errc::would_block)) c.error = n.error();
        break;
      }
      if (*n == 0) {
        c.eof = true;
        break;
      }
      if (!pattern.matches(c.start + c.got, std::span(buf, *n))) c.mismatch = true;
      c.got += *n;
    }
    if (c.finished()) {
      c.stream.on_readable({});
      static_cast<void>(c.stream.shutdown_write());
      c.stream.close();
    }
  });
}

class TcpGracefulClose : public TcpTest {
 protected:
  // `connections` clients at once; each reply 1 B..256 KiB; `trailing` unread bytes.
  void run(std::size_t connections, std::size_t trailing) {
    ASSERT_TRUE(ensure_fd_limit(2 * connections + 64)) << "RLIMIT_NOFILE too low";
    const Pattern pattern(testing::seed_for("pattern"));
    auto rng = testing::test_rng("sizes");
    std::vector<std::size_t> sizes(connections);
    for (auto& s : sizes) s = testing::log_uniform(rng, 1, 256 << 10);
    std::vector<std::unique_ptr<Server>> servers;
    auto l = tcp_listen(loop(), loopback(), {}, [&](Stream s) {
      servers.push_back(std::make_unique<Server>(std::move(s), pattern, sizes));
    });
    ASSERT_TRUE(l.ok()) << l.error().message();
    std::vector<Client> clients(connections);
    for (std::size_t i = 0; i < connections; ++i) {
      clients[i].start = i * 7919;
      clients[i].expect = sizes[i];
      tcp_connect(loop(), loopback(l->port()), {}, [&, i](Result<Stream> r) {
        if (!r) {
          clients[i].error = r.error();
          return;
        }
        clients[i].stream = std::move(r).value();
        run_client(clients[i], pattern, i, trailing);
      });
    }
    auto all_finished = [&] {
      for (const auto& c : clients) {
        if (!c.finished()) return false;
      }
      return true;
    };
    ASSERT_TRUE(loop().run_for(all_finished, 60s)) << "accepted " << servers.size();
    std::size_t whole = 0;
    for (std::size_t i = 0; i < connections; ++i) {
      const Client& c = clients[i];
      EXPECT_FALSE(c.error) << "client " << i << " after " << c.got << " of " << c.expect
                            << " bytes: " << c.error.message();
      EXPECT_FALSE(c.mismatch) << "client " << i << ": reply bytes differ";
      if (c.eof && c.got == c.expect && !c.mismatch) ++whole;
    }
    EXPECT_EQ(whole, connections) << "replies whole at the client";
    for (const auto& s : servers) EXPECT_FALSE(s->error) << s->error.message();
    // Every lingering socket saw its client's EOF and let go.
    EXPECT_TRUE(loop().run_for([&] { return tcp::lingering(loop()) == 0; }, 10s))
        << tcp::lingering(loop()) << " sockets still linger";
  }
};

TEST_F(TcpGracefulClose, ThousandConnectionsEachGetTheirWholeReply) {
  run(1000, 0);
}

TEST_F(TcpGracefulClose, TrailingBytesTheServerNeverReadsDoNotResetTheReply) {
  run(200, 16 << 10);
}

// A peer that never sends its EOF: the socket lingers until linger_timeout, then is
// aborted (the client sees the reset only after it had read the whole reply and EOF).
TEST_F(TcpGracefulClose, LingerTimeoutAbortsAPeerThatNeverCloses) {
  TcpOptions options;
  options.linger_timeout = 200ms;
  auto pair = connect_pair(options);  // named: the lambdas capture it (clang 14)
  Stream& client = pair.first;
  Stream& server = pair.second;
  ASSERT_TRUE(client && server);
  ASSERT_TRUE(server.write("reply", 5).ok());
  ASSERT_TRUE(server.shutdown_write().ok());
  const auto closed_at = loop().now();
  server.close();
  EXPECT_EQ(tcp::lingering(loop()), 1u);
  std::string got;
  bool eof = false;
  std::error_code after_eof;
  client.on_readable([&] {
    char buf[64];
    for (;;) {
      auto n = client.read(buf, sizeof buf);
      if (!n) {
        if (!n.is(Errc::would_block)) {
          after_eof = n.error();
          client.on_readable({});
        }
        return;
      }
      if (*n == 0) {
        if (eof) return;  // repeated EOF: wait for the reset
        eof = true;
        continue;
      }
      got.append(buf, *n);
    }
  });
  ASSERT_TRUE(loop().run_for([&] { return eof; }, 10s));
  EXPECT_EQ(got, "reply");
  ASSERT_TRUE(loop().run_for([&] { return tcp::lingering(loop()) == 0; }, 10s));
  EXPECT_GE(loop().now() - closed_at, 200ms) << "let go before the linger timeout";
  // The client, idle in CLOSE_WAIT, learns of the abort on its next write.
  std::error_code write_error;
  ASSERT_TRUE(loop().run_for(
      [&] {
        write_error = client.write("x", 1).error();
        return bool(write_error);
      },
      10s));
  EXPECT_TRUE(write_error == make_error_code(Errc::peer_closed) ||
              write_error == make_error_code(Errc::connection_reset))
      << write_error.message();
}

// The loop's destruction aborts what still lingers: the socket is closed (RST), not leaked.
TEST_F(TcpGracefulClose, DestroyingTheLoopAbortsLingeringSockets) {
  listen();
  const int raw = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(raw, 0);
  const auto to = loopback(listener_.port());
  ASSERT_EQ(::connect(raw, to.sockaddr_ptr(), to.length()), 0);
  ASSERT_TRUE(loop().run_for([&] { return !accepted_.empty(); }, 10s));
  Stream server = std::move(accepted_.front());
  accepted_.pop_front();
  ASSERT_TRUE(server.write("bye", 3).ok());
  ASSERT_TRUE(server.shutdown_write().ok());
  server.close();
  EXPECT_EQ(tcp::lingering(loop()), 1u);
  char buf[8];
  pollfd p{raw, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10'000), 1);
  EXPECT_EQ(::recv(raw, buf, sizeof buf, MSG_DONTWAIT), 3);
  EXPECT_EQ(::recv(raw, buf, sizeof buf, MSG_DONTWAIT), 0) << "no EOF after the reply";
  server = Stream();
  listener_ = Listener();
  loop_.reset();
  p = {raw, 0, 0};  // POLLHUP: both directions shut, which the RST does
  EXPECT_EQ(::poll(&p, 1, 10'000), 1);
  EXPECT_TRUE(p.revents & POLLHUP) << "the lingering socket was not closed: " << p.revents;
  ::close(raw);
}

}  // namespace
}  // namespace rmsg
