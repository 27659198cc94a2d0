#include "rpc_baseline.h"

#include <chrono>
#include <memory>
#include <optional>

namespace rmsg::perf {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// Both ends of one connection on `loop`: `server` echoes (ping-pong) or swallows
// (streaming); `client` is what the measurement writes on.
struct Pair {
  std::unique_ptr<ConnectionManager> cm;
  Listener listener;
  Stream client;
  Stream server;
};

Result<Pair> connect_pair(EventLoop& loop, ConnectionParams params, const SocketAddress& local) {
  Pair p;
  auto cm = ConnectionManager::create(loop);
  if (!cm) return cm.error();
  p.cm = std::move(cm).value();
  Pair* pp = &p;
  auto l = p.cm->listen(local, params, [pp](Stream s) { pp->server = std::move(s); });
  if (!l) return l.error();
  p.listener = std::move(l).value();
  params.peer = local;
  params.peer.set_port(p.listener.port());
  std::optional<Result<Stream>> got;
  p.cm->connect(params, [&](Result<Stream> r, const ConnectReport&) { got.emplace(std::move(r)); });
  if (!loop.run_for([&] { return got.has_value() && (!got->ok() || pp->server.valid()); }, 30s)) {
    return Errc::timeout;
  }
  if (!got->ok()) return got->error();
  p.client = std::move(got->value());
  return p;
}

// Writes all of `data` (running the loop while the stream is full).
Result<void> write_all(EventLoop& loop, Stream& s, std::span<const std::byte> data) {
  while (!data.empty()) {
    auto n = s.write(data);
    if (n) {
      data = data.subspan(n.value());
      continue;
    }
    if (!n.is(Errc::would_block)) return n.error();
    bool writable = false;
    s.on_writable([&] { writable = true; });
    if (!loop.run_for([&] { return writable; }, 30s)) return Errc::timeout;
  }
  return {};
}

// Reads what is there; returns the bytes read (0 when nothing), or an error. A read
// shorter than the buffer took everything there was: the stream's readiness calls again
// when more comes (a TCP socket is level-triggered; an RDMA stream's callback runs again
// after a read that made progress while more is readable), so the read that would only
// say would_block is not made, as the messenger does not make it (docs/messenger.md).
Result<std::size_t> drain(Stream& s, std::span<std::byte> buf, bool echo, EventLoop& loop) {
  std::size_t total = 0;
  for (;;) {
    auto n = s.read(buf);
    if (!n) {
      if (n.is(Errc::would_block)) return total;
      return n.error();
    }
    if (n.value() == 0) return Errc::peer_closed;
    total += n.value();
    if (echo) RMSG_TRY(write_all(loop, s, buf.first(n.value())));
    if (n.value() < buf.size()) return total;
  }
}

}  // namespace

Result<PingPongResult> stream_ping_pong(EventLoop& loop, const ConnectionParams& params,
                                        const SocketAddress& local, std::uint64_t size,
                                        std::uint64_t iters) {
  auto pair = connect_pair(loop, params, local);
  if (!pair) return pair.error();
  Pair& p = pair.value();
  std::vector<std::byte> msg(size, std::byte{0x5a});
  std::vector<std::byte> sbuf(64 << 10);
  std::vector<std::byte> cbuf(64 << 10);
  std::error_code err;
  p.server.on_readable([&] {
    auto r = drain(p.server, sbuf, true, loop);
    if (!r) err = r.error();
  });
  std::uint64_t got = 0;
  p.client.on_readable([&] {
    auto r = drain(p.client, cbuf, false, loop);
    if (!r) err = r.error();
    if (r) got += r.value();
  });
  PingPongResult out;
  const std::uint64_t warmup = iters / 10;
  SteadyClock::time_point start{};
  for (std::uint64_t i = 0; i < warmup + iters; ++i) {
    if (i == warmup) start = SteadyClock::now();
    const auto t0 = SteadyClock::now();
    got = 0;
    RMSG_TRY(write_all(loop, p.client, msg));
    if (!loop.run_for([&] { return got >= size || err; }, 30s)) return Errc::timeout;
    if (err) return err;
    if (i >= warmup) {
      out.rtt_us.push_back(
          std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count());
    }
  }
  out.elapsed_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return out;
}

Result<double> stream_streaming(EventLoop& loop, const ConnectionParams& params,
                                const SocketAddress& local, std::uint64_t size,
                                std::uint64_t count) {
  auto pair = connect_pair(loop, params, local);
  if (!pair) return pair.error();
  Pair& p = pair.value();
  std::vector<std::byte> msg(size, std::byte{0x5a});
  std::vector<std::byte> sbuf(256 << 10);
  std::error_code err;
  std::uint64_t received = 0;
  p.server.on_readable([&] {
    auto r = drain(p.server, sbuf, false, loop);
    if (!r) err = r.error();
    if (r) received += r.value();
  });
  const auto t0 = SteadyClock::now();
  for (std::uint64_t i = 0; i < count; ++i) {
    RMSG_TRY(write_all(loop, p.client, msg));
    if ((i & 63) == 0) (void)loop.run_once(Duration{0});  // let the receiver read
  }
  if (!loop.run_for([&] { return received >= size * count || err; }, 60s)) return Errc::timeout;
  if (err) return err;
  const double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return static_cast<double>(count) / secs;
}

}  // namespace rmsg::perf
