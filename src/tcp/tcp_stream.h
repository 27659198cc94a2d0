// TcpStream: the Stream contract (rmsg/stream.h) over one connected, non-blocking TCP
// socket. Data path only; connect and accept live in tcp_connect.cc / tcp_listener.cc.
//
// Readiness (the rule in rmsg/stream.h) over level-triggered epoll: a direction is armed
// (in the epoll interest) while its callback is set, until a call of that callback makes
// no progress - no read()/write() of that direction ran in it - which disarms it; read()
// or write() (a result other than a repeated EOF/error) and setting the callback arm it
// again. A would_block result arms, so the kernel reports the next change. The socket is
// watched only while some direction is armed: an idle stream whose peer hung up must not
// keep waking the loop (EPOLLHUP cannot be masked in epoll).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/lease.h"
#include "loop/alive.h"
#include "rmsg/event_loop.h"
#include "rmsg/stream.h"
#include "rmsg/tcp.h"

namespace rmsg::tcp {

class TcpStream final : public StreamImpl {
 public:
  // Takes ownership of `fd`, a connected non-blocking socket with its options applied.
  // `linger_timeout` bounds a graceful close (TcpOptions::linger_timeout).
  TcpStream(EventLoop& loop, int fd, Duration linger_timeout);
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;
  TcpStream(TcpStream&&) = delete;
  TcpStream& operator=(TcpStream&&) = delete;
  ~TcpStream() override;

  Result<std::size_t> write(std::span<const std::byte> data) override;
  // One sendmsg(2) over the non-empty parts (writev(2) with MSG_NOSIGNAL: no SIGPIPE), at
  // most IOV_MAX of them: with more, only that many are offered and the count accepted is
  // a prefix at most their sum. Errors as write(); only empty parts return 0 (closed:
  // Errc::closed), as on the RDMA stream.
  Result<std::size_t> writev(std::span<const std::span<const std::byte>> parts) override;
  Result<std::size_t> read(std::span<std::byte> buf) override;
  void on_readable(Task callback) override;
  void on_writable(Task callback) override;
  Result<void> shutdown_write() override;
  void close() override;
  std::error_code error() const override;
  const char* transport() const override { return "tcp"; }
  std::string local_address() const override { return local_; }
  std::string peer_address() const override { return peer_; }
  EventLoop& loop() const override { return loop_; }

  int native_handle() const noexcept { return fd_; }
  // Held until the connection is released: close(), or the end of the linger that close()
  // starts (a connection manager's count of live connections, tcp_linger.h).
  void hold_lease(Lease lease) { lease_ = std::move(lease); }

 private:
  // One readiness direction: its callback and its arming (see the top of this file).
  struct Direction {
    // shared_ptr: dispatch keeps the callable alive while it runs, even if the callback
    // replaces itself or destroys the stream.
    std::shared_ptr<Task> callback;
    bool armed = true;
    std::uint64_t uses = 0;  // arming calls so far: a callback that changed none disarms
  };
  void arm(Direction& d);
  void update_interest();
  void dispatch(std::uint32_t events);
  // Calls d's callback; false if the stream was destroyed or closed meanwhile.
  bool call(Direction& d, const Alive<TcpStream>::Token& frame);
  std::error_code fail(int err);
  Result<void> check_writable() const;
  Result<std::size_t> send_iov(const msghdr& msg);

  EventLoop& loop_;
  int fd_;
  WatchId watch_ = 0;
  std::uint32_t interest_ = 0;
  Direction read_;
  Direction write_;
  Duration linger_timeout_;
  std::error_code error_;  // the first failure; sticky
  bool write_shut_ = false;
  bool eof_ = false;
  bool closed_ = false;
  std::string local_;
  std::string peer_;
  Lease lease_;
  // dispatch() learns that a callback destroyed the stream, also after a nested dispatch of
  // it (a callback that runs the loop): each frame holds its own token (loop/alive.h).
  Alive<TcpStream> alive_{loop_, this};
};

// Wraps a connected socket (ownership passes to the Stream), which holds `lease` until it
// is released (TcpStream::hold_lease).
Stream make_stream(EventLoop& loop, int fd, const TcpOptions& options, Lease lease = {});

}  // namespace rmsg::tcp
