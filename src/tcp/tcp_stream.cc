#include "tcp/tcp_stream.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <climits>

#include <utility>

#include "loop/loop_thread.h"
#include "rmsg/log.h"
#include "tcp/tcp_linger.h"
#include "tcp/tcp_socket.h"

namespace rmsg::tcp {

TcpStream::TcpStream(EventLoop& loop, int fd, Duration linger_timeout)
    : loop_(loop),
      fd_(fd),
      linger_timeout_(linger_timeout),
      local_(local_name(fd)),
      peer_(peer_name(fd)) {}

TcpStream::~TcpStream() {
  close();
}

// The first error is a change both directions report; a repeat is none.
std::error_code TcpStream::fail(int err) {
  if (!error_) {
    error_ = map_errno(err);
    arm(read_);
    arm(write_);
  }
  return error_;
}

Result<void> TcpStream::check_writable() const {
  if (closed_) return Errc::closed;
  if (error_) return error_;
  if (write_shut_) return Errc::shutdown;
  return {};
}

Result<std::size_t> TcpStream::write(std::span<const std::byte> data) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  RMSG_TRY(check_writable());
  if (data.empty()) return Errc::invalid_argument;
  iovec iov{const_cast<std::byte*>(data.data()), data.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  return send_iov(msg);
}

Result<std::size_t> TcpStream::writev(std::span<const std::span<const std::byte>> parts) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed_) return Errc::closed;
  // On the stack (16 KiB at IOV_MAX 1024): no allocation per call.
  std::array<iovec, IOV_MAX> iov;
  std::size_t count = 0;
  for (const auto part : parts) {
    if (part.empty()) continue;
    if (count == iov.size()) break;
    // iovec's base is not const; sendmsg only reads through it.
    iov[count++] = {const_cast<std::byte*>(part.data()), part.size()};
  }
  if (count == 0) return std::size_t{0};  // nothing asked: 0 in every state but closed
  RMSG_TRY(check_writable());
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = count;
  return send_iov(msg);
}

// The one send path of write and writev: sendmsg maps its errors as send would.
Result<std::size_t> TcpStream::send_iov(const msghdr& msg) {
  for (;;) {
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n >= 0) {
      arm(write_);
      return static_cast<std::size_t>(n);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      arm(write_);
      return Errc::would_block;
    }
    return fail(errno);
  }
}

Result<std::size_t> TcpStream::read(std::span<std::byte> buf) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed_) return Errc::closed;
  if (error_) return error_;
  if (buf.empty()) return Errc::invalid_argument;
  for (;;) {
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n > 0) {
      arm(read_);
      return static_cast<std::size_t>(n);
    }
    if (n == 0) {
      if (!eof_) arm(read_);  // a repeated EOF is no change
      eof_ = true;
      return std::size_t{0};
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      arm(read_);
      return Errc::would_block;
    }
    return fail(errno);
  }
}

void TcpStream::on_readable(Task callback) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed_) return;
  read_.callback = callback ? std::make_shared<Task>(std::move(callback)) : nullptr;
  read_.armed = true;
  ++read_.uses;  // a callback that replaces itself made a change
  update_interest();
}

void TcpStream::on_writable(Task callback) {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed_) return;
  write_.callback = callback ? std::make_shared<Task>(std::move(callback)) : nullptr;
  write_.armed = true;
  ++write_.uses;  // a callback that replaces itself made a change
  update_interest();
}

void TcpStream::arm(Direction& d) {
  ++d.uses;
  if (d.armed) return;
  d.armed = true;
  if (d.callback) update_interest();
}

void TcpStream::update_interest() {
  if (closed_) return;
  const std::uint32_t want = (read_.callback && read_.armed ? kReadable : 0u) |
                             (write_.callback && write_.armed ? kWritable : 0u);
  if (want == interest_) return;
  if (want == 0) {
    loop_.unwatch(watch_);
    watch_ = 0;
  } else if (watch_ == 0) {
    auto w = loop_.watch(fd_, want, [this](std::uint32_t ev) { dispatch(ev); });
    if (!w) {
      // The callbacks cannot fire; the next read()/write() reports why.
      RMSG_LOG(error, "tcp: cannot watch socket: %s", w.error().message().c_str());
      if (!error_) error_ = w.error();
      return;
    }
    watch_ = *w;
  } else if (auto r = loop_.set_interest(watch_, want); !r) {
    RMSG_LOG(error, "tcp: cannot change interest: %s", r.error().message().c_str());
    if (!error_) error_ = r.error();
    return;
  }
  interest_ = want;
}

void TcpStream::dispatch(std::uint32_t events) {
  const auto frame = alive_.token();
  if ((events & kReadable) && !call(read_, frame)) return;
  if ((events & kWritable) && !call(write_, frame)) return;
  update_interest();
}

bool TcpStream::call(Direction& d, const Alive<TcpStream>::Token& frame) {
  if (!d.callback || !d.armed) return true;
  const auto cb = d.callback;
  const std::uint64_t uses = d.uses;
  (*cb)();
  if (!frame.alive() || closed_) return false;
  if (d.uses == uses) d.armed = false;  // no progress: rest until read/write/set
  return true;
}

Result<void> TcpStream::shutdown_write() {
  RMSG_ASSERT_LOOP_THREAD(loop_);
  if (closed_) return Errc::closed;
  if (error_) return error_;
  if (write_shut_) return {};
  if (::shutdown(fd_, SHUT_WR) < 0) return fail(errno);
  write_shut_ = true;
  arm(write_);  // write() now reports Errc::shutdown
  return {};
}

void TcpStream::close() {
  if (closed_) return;
  RMSG_ASSERT_LOOP_THREAD(loop_);
  closed_ = true;
  loop_.unwatch(watch_);
  watch_ = 0;
  interest_ = 0;
  read_.callback.reset();
  write_.callback.reset();
  const int fd = std::exchange(fd_, -1);
  const bool graceful = write_shut_ && !error_;
  if (graceful && !eof_ && linger_timeout_ > Duration::zero()) {
    // The loop owns it until the peer's EOF, and the lease with it.
    linger(loop_, fd, linger_timeout_, std::move(lease_));
    return;
  }
  lease_.reset();
  // A connection finished in both directions closes quietly; anything else is an abort.
  close_socket(fd, !(graceful && eof_));
}

std::error_code TcpStream::error() const {
  if (error_) return error_;
  if (closed_) return make_error_code(Errc::closed);
  return {};
}

Stream make_stream(EventLoop& loop, int fd, const TcpOptions& options, Lease lease) {
  auto s = std::make_unique<TcpStream>(loop, fd, options.linger_timeout);
  s->hold_lease(std::move(lease));
  return Stream(std::move(s));
}

}  // namespace rmsg::tcp
