// Objects made on one thread for a loop that then runs on another (issue: per-loop
// services). Everything is created on the test's main thread before the loop runs: a plain
// listener and a managed one, a plain connect and a managed connect. A second thread then
// runs the loop: both connections echo data byte-exact, then close; with RDMA the managed
// structures are recycled, which needs the old ids' TIMEWAIT_EXIT to reach the recycler.
// Used by cross_thread_tcp_test.cc (host) and cross_thread_rdma_test.cc (guest).
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rmsg/connection_manager.h"
#include "rmsg/event_loop.h"
#include "rmsg/rdma.h"
#include "rmsg/stream.h"
#include "rmsg/tcp.h"

namespace rmsg::testing {

// Echoes every byte it reads, on its loop's thread.
class Echo {
 public:
  explicit Echo(Stream stream) : stream_(std::move(stream)) {
    stream_.on_readable([this] { pump(); });
  }
  Stream& stream() { return stream_; }

 private:
  void pump() {
    std::byte buf[16384];
    for (;;) {
      if (!pending_.empty() && !flush()) return;
      auto n = stream_.read(buf, sizeof buf);
      if (!n || n.value() == 0) {
        stream_.on_readable({});
        return;
      }
      pending_.insert(pending_.end(), buf, buf + n.value());
    }
  }
  bool flush() {  // true once nothing is pending
    while (!pending_.empty()) {
      auto n = stream_.write(pending_.data(), pending_.size());
      if (!n) {
        stream_.on_writable([this] {
          stream_.on_writable({});
          pump();
        });
        return false;
      }
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n.value()));
    }
    return true;
  }
  Stream stream_;
  std::vector<std::byte> pending_;
};

// Writes `data`, reads it back; done() once every byte came back (or the stream failed).
class EchoClient {
 public:
  explicit EchoClient(std::size_t bytes) : out_(bytes) {
    for (std::size_t i = 0; i < bytes; ++i) out_[i] = static_cast<std::byte>((i * 131 + 7) & 0xff);
  }
  void start(Stream stream) {
    stream_ = std::move(stream);
    stream_.on_writable([this] { push(); });
    stream_.on_readable([this] { pull(); });
  }
  bool done() const { return failed_ || in_.size() == out_.size(); }
  bool exact() const { return !failed_ && in_ == out_; }
  Stream& stream() { return stream_; }

 private:
  void push() {
    while (sent_ < out_.size()) {
      auto n = stream_.write(out_.data() + sent_, out_.size() - sent_);
      if (!n) {
        failed_ = !n.is(Errc::would_block);
        return;
      }
      sent_ += n.value();
    }
    stream_.on_writable({});
  }
  void pull() {
    std::byte buf[16384];
    for (;;) {
      auto n = stream_.read(buf, sizeof buf);
      if (!n) {
        failed_ = !n.is(Errc::would_block);
        return;
      }
      if (n.value() == 0) {
        failed_ = true;  // EOF before every byte came back
        return;
      }
      in_.insert(in_.end(), buf, buf + n.value());
    }
  }
  Stream stream_;
  std::vector<std::byte> out_, in_;
  std::size_t sent_ = 0;
  bool failed_ = false;
};

struct CrossThreadResult {
  bool plain_exact = false;
  bool managed_exact = false;
  std::string connect_errors;
  std::size_t idle_after_close = 0;  // managed structures parked again (RDMA)
  std::uint64_t timewait_missing = 0;
  std::uint64_t recycled = 0;
};

// Runs the scenario above; `listen` and `connect` are the plain transport's calls.
inline CrossThreadResult run_cross_thread(Transport transport, const SocketAddress& address) {
  using namespace std::chrono_literals;
  CrossThreadResult result;
  auto loop = EventLoop::create();
  EXPECT_TRUE(loop.ok());
  if (!loop) return result;
  ConnectionManagerOptions mopts;
  mopts.wait_timewait = true;
  mopts.timewait_limit = 60s;  // far above the ~2 s TIMEWAIT_EXIT takes on rxe
  auto manager = ConnectionManager::create(*loop.value(), mopts);
  EXPECT_TRUE(manager.ok());
  if (!manager) return result;

  std::deque<Echo> servers;
  auto on_accept = [&servers](Stream s) { servers.emplace_back(std::move(s)); };
  ConnectionParams params;
  params.transport = transport;
  params.rdma.retry_count = 6;
  Result<Listener> plain = transport == Transport::rdma
                               ? rdma_listen(*loop.value(), address, params.rdma, on_accept)
                               : tcp_listen(*loop.value(), address, params.tcp, on_accept);
  auto managed = manager.value()->listen(address, params, on_accept);
  EXPECT_TRUE(plain.ok() && managed.ok());
  if (!plain || !managed) return result;

  constexpr std::size_t kBytes = 256 * 1024;
  EchoClient plain_client(kBytes), managed_client(kBytes);
  int connects = 0;
  auto connected = [&](EchoClient& client) {
    return [&](Result<Stream> s) {
      ++connects;
      if (!s) {
        result.connect_errors += s.error().message() + "; ";
        return;
      }
      client.start(std::move(s).value());
    };
  };
  SocketAddress plain_peer = address, managed_peer = address;
  plain_peer.set_port(plain.value().port());
  managed_peer.set_port(managed.value().port());
  if (transport == Transport::rdma) {
    rdma_connect(*loop.value(), plain_peer, params.rdma, connected(plain_client));
  } else {
    tcp_connect(*loop.value(), plain_peer, params.tcp, connected(plain_client));
  }
  ConnectionParams mparams = params;
  mparams.peer = managed_peer;
  manager.value()->connect(mparams, ConnectCallback(connected(managed_client)));

  std::thread runner([&] {
    EventLoop& l = *loop.value();
    ConnectionManager& m = *manager.value();
    l.run_for([&] { return connects == 2 && plain_client.done() && managed_client.done(); }, 60s);
    result.plain_exact = plain_client.exact();
    result.managed_exact = managed_client.exact();
    plain_client.stream().close();
    managed_client.stream().close();
    for (auto& s : servers) s.stream().close();
    if (transport == Transport::rdma) {
      l.run_for([&] { return m.recycling() == 0 && m.idle() >= 2; }, 30s);
    }
    result.idle_after_close = m.idle();
    result.timewait_missing = m.counters().value("structures.timewait_missing");
    result.recycled = m.counters().value("structures.recycled");
    // Everything made for the loop goes on the loop's thread.
    servers.clear();
    plain = Listener();
    managed = Listener();
    plain_client = EchoClient(0);
    managed_client = EchoClient(0);
    manager.value().reset();
  });
  runner.join();
  return result;
}

}  // namespace rmsg::testing
