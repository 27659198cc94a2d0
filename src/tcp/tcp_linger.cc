#include "tcp/tcp_linger.h"

#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <unordered_map>

#include "loop/loop_thread.h"
#include "rmsg/log.h"
#include "stream/stream_access.h"
#include "tcp/tcp_socket.h"
#include "tcp/tcp_stream.h"

namespace rmsg::tcp {
namespace {

const char kServiceKey = 0;

class Lingerer {
 public:
  explicit Lingerer(EventLoop& loop) : loop_(loop) {}
  Lingerer(const Lingerer&) = delete;
  Lingerer& operator=(const Lingerer&) = delete;
  Lingerer(Lingerer&&) = delete;
  Lingerer& operator=(Lingerer&&) = delete;
  // The loop goes away: whatever still lingers is aborted.
  ~Lingerer() {
    for (auto& [fd, entry] : sockets_) {
      loop_.unwatch(entry.watch);
      loop_.cancel_timer(entry.timer);
      close_socket(fd, true);
    }
  }

  void add(int fd, Duration timeout, Lease lease) {
    auto w = loop_.watch(fd, kReadable, [this, fd](std::uint32_t) { drain(fd); });
    if (!w) {
      RMSG_LOG(warn, "tcp: cannot linger: %s", w.error().message().c_str());
      close_socket(fd, true);
      return;
    }
    const TimerId timer = loop_.add_timer(timeout, [this, fd] { finish(fd, true); });
    sockets_.emplace(fd, Entry{*w, timer, std::move(lease)});
  }

  std::size_t size() const { return sockets_.size(); }

 private:
  struct Entry {
    WatchId watch;
    TimerId timer;
    Lease lease;  // released with the socket
  };

  // Reads and drops; at EOF the peer has seen our FIN, so a plain close sends no RST.
  void drain(int fd) {
    std::byte scratch[16384];
    for (;;) {
      const ssize_t n = ::recv(fd, scratch, sizeof scratch, 0);
      if (n > 0) continue;
      if (n == 0) return finish(fd, false);
      if (errno == EINTR) continue;
      if (errno != EAGAIN) finish(fd, true);
      return;
    }
  }

  void finish(int fd, bool abortive) {
    auto it = sockets_.find(fd);
    if (it == sockets_.end()) return;
    loop_.unwatch(it->second.watch);
    loop_.cancel_timer(it->second.timer);  // safe inside the timer's own callback
    sockets_.erase(it);
    close_socket(fd, abortive);
  }

  EventLoop& loop_;
  std::unordered_map<int, Entry> sockets_;
};

Lingerer* find(EventLoop& loop) {
  return static_cast<Lingerer*>(loop.service(&kServiceKey).get());
}

}  // namespace

void linger(EventLoop& loop, int fd, Duration timeout, Lease lease) {
  RMSG_ASSERT_LOOP_THREAD(loop);
  Lingerer* service = find(loop);
  if (service == nullptr) {
    auto made = std::make_shared<Lingerer>(loop);
    service = made.get();
    loop.set_service(&kServiceKey, std::move(made));
  }
  service->add(fd, timeout, std::move(lease));
}

std::size_t lingering(EventLoop& loop) {
  const Lingerer* service = find(loop);
  return service == nullptr ? 0 : service->size();
}

bool hold_lease(Stream& stream, Lease lease) {
  auto* tcp = detail::StreamAccess::as<TcpStream>(stream);
  if (tcp == nullptr) return false;
  tcp->hold_lease(std::move(lease));
  return true;
}

}  // namespace rmsg::tcp
