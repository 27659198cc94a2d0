// TcpRouter: an accepted TCP connection's first bytes, peeked, name the manager that takes it.
#include "cm/tcp_router.h"

#include <algorithm>
#include <string>

#include "rmsg/log.h"

namespace rmsg::cm {
namespace {

Counter& named(CounterSet& set, const std::string& prefix, const char* what) {
  return set.counter(prefix + what);
}

void set_lowat(int fd, std::size_t n) noexcept {
  if (auto r = tcp::set_rcvlowat(fd, n); !r) {
    // The router then wakes on every byte of the prefix instead of once: slower, not wrong.
    RMSG_LOG(warn, "cm: SO_RCVLOWAT: %s", r.error().message().c_str());
  }
}

}  // namespace

TcpRouter::TcpRouter(EventLoop& loop, AcceptRouting routing, std::shared_ptr<TcpTarget> own,
                     CounterSet& counters, Here here)
    : loop_(loop),
      routing_(std::move(routing)),
      own_(std::move(own)),
      here_(std::move(here)),
      routed_(named(counters, routing_.counter_prefix, "routed")),
      timeouts_(named(counters, routing_.counter_prefix, "timeout")),
      closed_(named(counters, routing_.counter_prefix, "closed")),
      malformed_(named(counters, routing_.counter_prefix, "malformed")),
      evicted_(named(counters, routing_.counter_prefix, "evicted")),
      target_gone_(named(counters, routing_.counter_prefix, "target_gone")),
      buf_(std::max<std::size_t>(routing_.max_prefix, 1)) {
  routing_.max_waiting = std::max<std::size_t>(routing_.max_waiting, 1);
}

TcpRouter::~TcpRouter() {
  for (auto& [fd, p] : pending_) {
    loop_.unwatch(p.watch);
    loop_.cancel_timer(p.timer);
    tcp::close_socket(p.socket.release(), false);
  }
}

void TcpRouter::take(tcp::OwnedSocket socket, Lease lease) {
  const int fd = socket.get();
  if (pending_.size() >= routing_.max_waiting) evict_oldest();
  auto w = loop_.watch(fd, kReadable, [this, fd](std::uint32_t) { on_readable(fd); });
  if (!w) {
    closed_.add_owned();
    return tcp::close_socket(socket.release(), false);  // the lease goes with it
  }
  Pending& p = pending_[fd];
  p.socket = std::move(socket);
  p.lease = std::move(lease);
  p.watch = *w;
  p.serial = next_serial_++;
  order_.emplace_back(fd, p.serial);
  if (order_.size() > 2 * pending_.size() + 64) {  // stale entries outnumber the live
    std::erase_if(order_, [this](const auto& e) { return !current(e); });
  }
  p.timer = loop_.add_timer(routing_.timeout, [this, fd] {
    pending_[fd].timer = 0;
    drop(fd, timeouts_);
  });
  // The first wake-up: what the reader asks of no bytes at all.
  const AffinityRead first = routing_.read_affinity({});
  const bool wait = first.verdict == AffinityRead::Verdict::need_more;
  set_lowat(fd, wait ? std::max<std::size_t>(first.need, 1) : 1);
}

void TcpRouter::on_readable(int fd) {
  auto n = tcp::peek(fd, buf_);
  if (n.is(Errc::would_block)) return;
  if (!n || n.value() == 0) return drop(fd, closed_);
  const AffinityRead r = routing_.read_affinity({buf_.data(), n.value()});
  switch (r.verdict) {
    case AffinityRead::Verdict::reject:
      return drop(fd, malformed_);
    case AffinityRead::Verdict::need_more:
      if (r.need > buf_.size() || r.need <= n.value()) return drop(fd, malformed_);
      if (tcp::hung_up(fd)) return drop(fd, closed_);  // the rest can never come
      return set_lowat(fd, r.need);
    case AffinityRead::Verdict::route:
      return route(fd, r.affinity);
  }
}

void TcpRouter::route(int fd, std::uint64_t affinity) {
  set_lowat(fd, 1);  // as a fresh socket: its stream is readable from the first byte
  Pending p = extract(fd);
  routed_.add_owned();
  const AcceptTarget target =
      affinity != 0 && routing_.router ? routing_.router(affinity) : AcceptTarget{};
  const auto& to = TcpTargetAccess::target(target);
  if (!to || to == own_) return here_(std::move(p.socket), std::move(p.lease));
  if (auto r = to->hand_off(p.socket, p.lease); !r) {
    RMSG_LOG(info, "cm: routing an accepted connection (affinity %llu) failed: the target is gone",
             static_cast<unsigned long long>(affinity));
    target_gone_.add_owned();
    tcp::close_socket(p.socket.release(), false);
  }
}

TcpRouter::Pending TcpRouter::extract(int fd) {
  auto node = pending_.extract(fd);
  Pending p = std::move(node.mapped());
  loop_.unwatch(p.watch);
  if (p.timer != 0) loop_.cancel_timer(p.timer);  // safe inside the timer's own callback
  return p;
}

void TcpRouter::drop(int fd, Counter& why) {
  if (!pending_.contains(fd)) return;
  Pending p = extract(fd);
  why.add_owned();
  tcp::close_socket(p.socket.release(), false);
}

bool TcpRouter::current(const std::pair<int, std::uint64_t>& entry) const {
  auto it = pending_.find(entry.first);
  return it != pending_.end() && it->second.serial == entry.second;
}

void TcpRouter::evict_oldest() {
  while (!order_.empty()) {
    const auto entry = order_.front();
    order_.pop_front();
    if (!current(entry)) continue;
    RMSG_LOG(debug, "cm: accept router full (%zu waiting): closing the oldest", pending_.size());
    drop(entry.first, evicted_);
    return;
  }
}

}  // namespace rmsg::cm
