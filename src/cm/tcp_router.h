// TcpRouter: the TCP half of routing accepts (ConnectionManager::listen with an
// AcceptRouting whose read_affinity is set; docs/connection-manager.md, "Routing accepts").
// A TCP connect carries no affinity: the application's first bytes do (a messenger's
// banner and hello name its node). So every accepted socket waits here, on the listener's
// loop, unread: its first bytes are peeked (MSG_PEEK, with SO_RCVLOWAT set to the bytes
// still needed, so that epoll wakes the router only when they are there) and given to
// read_affinity until it answers; then the untouched socket goes, with its lease, to the
// manager the router names (a TcpTarget, posted to its loop) or to this listener's own
// accept callback. Whoever gets it wraps it in a Stream there, and reads it from byte 0.
//
// What is closed instead, and counted (<counter_prefix>...): `malformed`, rejected by
// read_affinity (or asking more than max_prefix); `closed`, ended (or failed) before the
// answer; `timeout`, no answer within `timeout`; `evicted`, the oldest waiting when one
// more than max_waiting arrives (a connect flood of silent sockets would otherwise hold a
// descriptor each for the timeout: a real connector sends its first bytes with its
// connect, so it waits least); `target_gone`, routed to a closed target. `routed` counts
// those handed on (to any manager, this one included). A socket whose peer hung up
// before the answer is closed at once: a socket at end of stream is readable whatever
// SO_RCVLOWAT says and a peek consumes nothing, so waiting would spin the loop.
//
// Threading: the listener's loop thread. Destroying the router closes what still waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/lease.h"
#include "cm/tcp_target.h"
#include "rmsg/connection_manager.h"
#include "rmsg/counters.h"
#include "rmsg/event_loop.h"
#include "tcp/tcp_socket.h"

namespace rmsg::cm {

class TcpRouter {
 public:
  // A socket this listener accepts itself (routed to `own`, to no target, or affinity 0).
  using Here = std::function<void(tcp::OwnedSocket socket, Lease lease)>;

  // `counters`: routing.counters, or the manager's when that is null.
  TcpRouter(EventLoop& loop, AcceptRouting routing, std::shared_ptr<TcpTarget> own,
            CounterSet& counters, Here here);
  TcpRouter(const TcpRouter&) = delete;
  TcpRouter& operator=(const TcpRouter&) = delete;
  TcpRouter(TcpRouter&&) = delete;
  TcpRouter& operator=(TcpRouter&&) = delete;
  ~TcpRouter();

  // An accepted socket and its lease (empty: counted against nothing).
  void take(tcp::OwnedSocket socket, Lease lease);

 private:
  struct Pending {
    tcp::OwnedSocket socket{-1};
    Lease lease;
    WatchId watch = 0;
    TimerId timer = 0;
    std::uint64_t serial = 0;  // order of arrival (order_)
  };
  void on_readable(int fd);
  void route(int fd, std::uint64_t affinity);
  // Stops watching `fd` and takes its entry out.
  Pending extract(int fd);
  // Closes `fd` (FIN; a reset if its bytes were unread) and counts it as `why`.
  void drop(int fd, Counter& why);
  void evict_oldest();
  bool current(const std::pair<int, std::uint64_t>& entry) const;

  EventLoop& loop_;
  AcceptRouting routing_;
  std::shared_ptr<TcpTarget> own_;
  Here here_;
  Counter& routed_;
  Counter& timeouts_;
  Counter& closed_;
  Counter& malformed_;
  Counter& evicted_;
  Counter& target_gone_;
  std::unordered_map<int, Pending> pending_;
  // (fd, serial) in order of arrival; entries of sockets gone since are skipped (a reused
  // fd has a newer serial) and dropped when they reach the front or outnumber the live.
  std::deque<std::pair<int, std::uint64_t>> order_;
  std::uint64_t next_serial_ = 1;
  std::vector<std::byte> buf_;
};

}  // namespace rmsg::cm
