// Active open: a non-blocking connect() completed on the loop (writability, then
// SO_ERROR), with an optional deadline. Nothing here blocks or resolves names.
#include <sys/socket.h>

#include <cerrno>
#include <memory>

#include "loop/loop_thread.h"
#include "rmsg/tcp.h"
#include "tcp/tcp_socket.h"
#include "tcp/tcp_stream.h"

namespace rmsg {
namespace {

// Owned by the watcher, the timer and deferred tasks that may finish it; whichever
// finishes first delivers the callback and removes the others.
struct Connector {
  Connector(EventLoop& l, const TcpOptions& o, ConnectCallback c)
      : loop(l), options(o), callback(std::move(c)) {}
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;
  Connector(Connector&&) = delete;
  Connector& operator=(Connector&&) = delete;
  // Also runs when the loop is destroyed with the connect in flight (callback dropped).
  ~Connector() { tcp::close_socket(fd, true); }

  EventLoop& loop;
  TcpOptions options;
  ConnectCallback callback;
  int fd = -1;
  WatchId watch = 0;
  TimerId timer = 0;
  bool done = false;
};

void finish(const std::shared_ptr<Connector>& c, Result<Stream> result) {
  if (c->done) return;
  c->done = true;
  c->loop.unwatch(c->watch);
  if (c->timer != 0) c->loop.cancel_timer(c->timer);
  auto callback = std::move(c->callback);
  callback(std::move(result));
}

void complete(const std::shared_ptr<Connector>& c) {
  if (c->done) return;
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  if (err != 0) return finish(c, tcp::map_errno(err));
  c->loop.unwatch(c->watch);  // the stream watches the socket itself from now on
  c->watch = 0;
  const int fd = c->fd;
  c->fd = -1;
  finish(c, tcp::make_stream(c->loop, fd, c->options));
}

// connect()'s own errno: EAGAIN there means no free local port, not "try read again".
std::error_code connect_error(int err) {
  return err == EAGAIN ? make_error_code(Errc::resource_exhausted) : tcp::map_errno(err);
}

}  // namespace

void tcp_connect(EventLoop& loop, const SocketAddress& address, const TcpOptions& options,
                 ConnectCallback callback) {
  RMSG_ASSERT_LOOP_THREAD(loop);
  auto c = std::make_shared<Connector>(loop, options, std::move(callback));
  // The callback never runs inside this call, so callers need no re-entrancy care.
  auto fail_later = [&](std::error_code ec) { loop.defer([c, ec] { finish(c, ec); }); };
  auto fd = tcp::open_socket(address);
  if (!fd) return fail_later(fd.error());
  c->fd = *fd;
  if (auto r = tcp::apply_options(c->fd, options); !r) return fail_later(r.error());
  if (::connect(c->fd, address.sockaddr_ptr(), address.length()) == 0) {
    loop.defer([c] { complete(c); });
    return;
  }
  // EINTR: the connect goes on in the background, exactly like EINPROGRESS.
  if (errno != EINPROGRESS && errno != EINTR) return fail_later(connect_error(errno));
  auto w = loop.watch(c->fd, kWritable, [c](std::uint32_t) { complete(c); });
  if (!w) return fail_later(w.error());
  c->watch = *w;
  if (options.connect_timeout > Duration::zero()) {
    c->timer = loop.add_timer(options.connect_timeout, [c] { finish(c, Errc::timeout); });
  }
}

}  // namespace rmsg
