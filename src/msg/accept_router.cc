// AcceptRouter: peeking at an accepted connection's hello to find the loop it belongs to.
#include "msg/accept_router.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rmsg/log.h"
#include "stream/stream_access.h"
#include "tcp/tcp_stream.h"
#include "wire/banner.h"
#include "wire/hello_peek.h"

namespace rmsg::msg {
namespace {

void set_lowat(int fd, std::size_t n) noexcept {
  const int v = static_cast<int>(n);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) < 0) {
    // The router then wakes on every byte of the prefix instead of once: slower, not wrong.
    RMSG_LOG(warn, "messenger: SO_RCVLOWAT: %s", errno_code(errno).message().c_str());
  }
}

// Whether the peer sent its FIN (or the socket failed). A socket at end of stream stays
// readable whatever SO_RCVLOWAT says, and a peek consumes nothing, so a short prefix
// followed by a hang-up would wake the router again at once, for ever: it closes instead.
bool hung_up(int fd) noexcept {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

AcceptRouter::AcceptRouter(EventLoop& loop, Duration timeout, std::size_t max_waiting,
                           CounterSet& counters, Handoff handoff)
    : loop_(loop),
      timeout_(timeout),
      handoff_(std::move(handoff)),
      routed_(counters.counter("msg.route.routed")),
      timeouts_(counters.counter("msg.route.timeout")),
      closed_(counters.counter("msg.route.closed")),
      malformed_(counters.counter("msg.route.malformed")),
      unroutable_(counters.counter("msg.route.unroutable")),
      evicted_(counters.counter("msg.route.evicted")),
      max_waiting_(std::max<std::size_t>(max_waiting, 1)),
      buf_(wire::peek_hello_cap()) {}

AcceptRouter::~AcceptRouter() {
  for (auto& l : listeners_) l.close();
  for (auto& [fd, p] : pending_) {
    loop_.unwatch(p.watch);
    loop_.cancel_timer(p.timer);
    ::close(fd);
  }
}

void AcceptRouter::take(Stream stream) {
  auto* tcp = ::rmsg::detail::StreamAccess::as<tcp::TcpStream>(stream);
  Lease lease = tcp != nullptr ? tcp->take_lease() : Lease{};
  const int fd = tcp != nullptr ? tcp->release_fd() : -1;
  if (fd < 0) {  // not a TCP socket (a test's stream): it cannot be moved, so it goes
    unroutable_.add_owned();
    return;
  }
  if (pending_.size() >= max_waiting_) evict_oldest();
  auto w = loop_.watch(fd, kReadable, [this, fd](std::uint32_t) { on_readable(fd); });
  if (!w) {
    ::close(fd);
    closed_.add_owned();
    return;
  }
  Pending& p = pending_[fd];
  p.watch = *w;
  p.lease = std::move(lease);
  p.serial = next_serial_++;
  order_.emplace_back(fd, p.serial);
  if (order_.size() > 2 * pending_.size() + 64) {  // stale entries outnumber the live
    std::erase_if(order_, [this](const auto& e) { return !current(e); });
  }
  p.timer = loop_.add_timer(timeout_, [this, fd] {
    pending_[fd].timer = 0;
    finish(fd, &timeouts_);
  });
  set_lowat(fd, wire::kBannerMagic.size());  // garbage is told from a banner by its first 8 bytes
}

void AcceptRouter::on_readable(int fd) {
  const ssize_t n = ::recv(fd, buf_.data(), buf_.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    finish(fd, &closed_);
    return;
  }
  const wire::HelloPeek p = wire::peek_hello({buf_.data(), static_cast<std::size_t>(n)});
  switch (p.verdict) {
    case wire::HelloPeek::Verdict::malformed:
      finish(fd, &malformed_);
      return;
    case wire::HelloPeek::Verdict::need_more:
      if (hung_up(fd)) {  // the rest can never come
        finish(fd, &closed_);
        return;
      }
      set_lowat(fd, p.need);
      return;
    case wire::HelloPeek::Verdict::node: {
      set_lowat(fd, 1);
      Lease lease = finish(fd, nullptr);
      handoff_(p.node, fd, std::move(lease));
      return;
    }
  }
}

bool AcceptRouter::current(const std::pair<int, std::uint64_t>& entry) const {
  auto it = pending_.find(entry.first);
  return it != pending_.end() && it->second.serial == entry.second;
}

void AcceptRouter::evict_oldest() {
  while (!order_.empty()) {
    const auto entry = order_.front();
    order_.pop_front();
    if (!current(entry)) continue;
    RMSG_LOG(debug, "msg: accept router full (%zu waiting): closing the oldest", pending_.size());
    finish(entry.first, &evicted_);
    return;
  }
}

Lease AcceptRouter::finish(int fd, Counter* why) {
  auto it = pending_.find(fd);
  if (it == pending_.end()) return {};
  loop_.unwatch(it->second.watch);
  if (it->second.timer != 0) loop_.cancel_timer(it->second.timer);
  Lease lease = std::move(it->second.lease);
  pending_.erase(it);
  if (why == nullptr) {
    routed_.add_owned();
    return lease;
  }
  why->add_owned();
  ::close(fd);
  return {};  // released with the socket
}

}  // namespace rmsg::msg
