// Loopback: an in-memory rmsg::Stream / rmsg::Listener on one EventLoop, for tests of code
// above Stream (an application's protocol, the messenger) that need no sockets or devices,
// and a fault injector. The testing library rmsg-testing: find_package(rmsg) and link
// rmsg::testing (with rmsg::rmsg); examples/testing/ tests a small service on it.
//
// The contract is exactly rmsg/stream.h's (the Stream-contract suite runs on it, on TCP and
// on RDMA alike). What is specific to loopback, as tcp.h and rdma.h say for theirs:
//   - Each direction holds at most the writer's LoopbackOptions::buffer_size bytes written
//     and not yet read (delayed bytes included): a full pipe gives would_block, and
//     on_writable fires again once the reader frees space.
//   - An empty span to read()/write() is Errc::invalid_argument (as TCP and RDMA).
//   - Nothing is delivered inside a call: readiness is computed once per loop iteration
//     (deferred tasks), so a write never runs the peer's callback re-entrantly.
//   - close() (or destroying the Stream) without shutdown_write() is abortive: bytes not
//     yet delivered are dropped and the peer fails with Errc::connection_reset after the
//     bytes it had already received (read() returns those first). After shutdown_write()
//     it is graceful at once (nothing needs to linger in memory): the peer reads every
//     byte, delayed ones included, and EOF; its writes fail with Errc::peer_closed (what
//     it sends is never read). As with RDMA and TCP, a peer that had already received our
//     EOF reads the rest and EOF, and its writes fail with Errc::peer_closed.
//   - Readiness follows rmsg/stream.h's rule exactly; calls are deferred loop tasks.
//   - A stream failed by an injected fault fails with the injected error; its peer fails
//     with Errc::connection_reset (the connection is gone for both, as on a real transport).
//   - transport() is "loopback"; addresses are "name:port" (the connecting side's name is
//     LoopbackOptions::local_name, its port an ephemeral one).
//
// Threading: everything is loop-thread-only (the loop passed in). Listeners and streams
// must not outlive their loop; a connect still pending when the loop is destroyed is
// dropped unrun (as TCP's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "rmsg/event_loop.h"
#include "rmsg/result.h"
#include "rmsg/stream.h"

namespace rmsg::testing {

struct LoopbackLink;

// Faults for one side of loopback connections: attach it through LoopbackOptions::faults
// (a connect's side, or every stream a listener accepts). Shared and changeable at any
// time from the loop thread: a change applies to the streams already attached (their
// readiness is re-evaluated) and to later ones. The byte-count faults fire once: the first
// attached stream to reach the count consumes them (a reconnect then runs clean).
class LoopbackFaults {
 public:
  // The next `count` connects made with these faults fail with `ec` (on the loop, never
  // inside loopback_connect), as a real connect's failure would (connection_refused,
  // timeout, unreachable...). The listener sees nothing of them.
  void fail_connects(std::error_code ec, int count = 1);
  // The stream fails with `ec` once it has read `after` bytes in all: a read() that would
  // cross that count returns the bytes up to it, the next read() fails (0: the next
  // read()). A due read fault makes on_readable fire, so a waiting reader learns of it.
  void fail_read(std::error_code ec, std::size_t after = 0);
  // As fail_read, for the bytes write()/writev() accepted (a write crossing the count is
  // short; the next one fails).
  void fail_write(std::error_code ec, std::size_t after = 0);
  // Bytes this side writes, and its EOF, become readable at the peer `d` after the write
  // (an EventLoop timer, so the loop's clock measures it). Order is kept; zero: at once.
  void delay(Duration d);
  // Tears down every open connection of this side now, as if the network (or the peer)
  // had aborted it: both of its streams fail with Errc::connection_reset.
  void reset();

  // For the loopback streams (loopback.cc), not for tests:
  struct Rule {
    std::error_code error;
    std::size_t after = 0;
    explicit operator bool() const noexcept { return static_cast<bool>(error); }
  };
  std::error_code take_connect_failure();
  Rule& read_rule() noexcept { return read_; }
  Rule& write_rule() noexcept { return write_; }
  Duration current_delay() const noexcept { return delay_; }
  void attach(const std::shared_ptr<LoopbackLink>& link, int side);

 private:
  void rearm_attached();  // re-evaluates the readiness of the attached streams

  std::error_code connect_error_;
  int connect_failures_ = 0;
  Rule read_;
  Rule write_;
  Duration delay_{0};
  std::vector<std::pair<std::weak_ptr<LoopbackLink>, int>> attached_;
};

struct LoopbackOptions {
  // Bytes this side may have written and the peer not yet read (its direction's capacity).
  std::size_t buffer_size = 64 * 1024;
  // Faults of this side (null: none).
  std::shared_ptr<LoopbackFaults> faults;
  // The connecting side's name in its local_address() (listeners use their own name).
  std::string local_name = "client";
};

// Listens on `name`:`port` of this loop (port 0 picks a free one: Listener::port()).
// `on_accept` runs on the loop thread with the server side of each connect, before the
// connect's callback. Errors: Errc::invalid_argument (empty name), EADDRINUSE (system
// category) when that name and port are taken on this loop.
Result<Listener> loopback_listen(EventLoop& loop, std::string_view name, std::uint16_t port,
                                 const LoopbackOptions& options, AcceptCallback on_accept);

// Connects to the listener on `name`:`port` of this loop. Returns at once; `done` runs
// exactly once on the loop thread, never inside this call, with the client side or
// Errc::connection_refused (nothing listens there) or an injected failure.
void loopback_connect(EventLoop& loop, std::string_view name, std::uint16_t port,
                      const LoopbackOptions& options, ConnectCallback done);

// A connected pair {a, b} at once, without a listener ("a:1" <-> "b:2"): each side's
// buffer size and faults come from its own options.
std::pair<Stream, Stream> loopback_pair(EventLoop& loop, const LoopbackOptions& a = {},
                                        const LoopbackOptions& b = {});

}  // namespace rmsg::testing
