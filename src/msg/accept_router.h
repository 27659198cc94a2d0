// AcceptRouter: with several loops, the TCP connections accepted on loop 0 reach the loop
// that owns their peer's session before a byte of them is consumed (docs/messenger.md,
// Threading: accepted connections). The connector writes its banner and hello at once; the
// router peeks (MSG_PEEK, the socket's SO_RCVLOWAT set to the bytes still needed, so that
// epoll wakes it only when they are there) until the hello's node id is in, then hands the
// untouched socket on. That shard wraps it in a Stream and runs the normal handshake from
// byte 0, checking everything (CRCs included) itself. A connection whose hello does not
// come within the handshake timeout, that ends first, or whose first bytes are not a
// messenger banner and a hello is closed and counted (msg.route.timeout / .closed /
// .malformed); msg.route.routed counts those handed on, msg.route.unroutable accepted
// streams that are no TCP socket (closed: only a socket can move to another loop).
// At most `max_waiting` sockets wait for their hello at once (a connect flood of silent
// sockets would otherwise hold a descriptor each for the handshake timeout): one more
// closes the one that has waited longest (msg.route.evicted). A real connector writes its
// banner and hello with its connect, so it waits least and is the last one evicted.
// The listener's ConnectionManager counts every accepted socket against its
// max_connections (a lease): the router keeps that lease with the socket while it waits
// and hands it on with it, so a routed connection counts until it is released on whichever
// loop it ends up (the lease is released there; connection_limit.h).
//
// Threading: loop 0's thread (the listener's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/lease.h"
#include "rmsg/counters.h"
#include "rmsg/event_loop.h"
#include "rmsg/messenger.h"
#include "rmsg/stream.h"

namespace rmsg::msg {

class AcceptRouter {
 public:
  // `handoff` gets the socket (a connected, non-blocking fd it now owns), the peer, and the
  // socket's lease (the listener's count of it; empty without one), to hold while it lives.
  using Handoff = std::function<void(NodeId peer, int fd, Lease lease)>;
  AcceptRouter(EventLoop& loop, Duration timeout, std::size_t max_waiting, CounterSet& counters,
               Handoff handoff);
  AcceptRouter(const AcceptRouter&) = delete;
  AcceptRouter& operator=(const AcceptRouter&) = delete;
  AcceptRouter(AcceptRouter&&) = delete;
  AcceptRouter& operator=(AcceptRouter&&) = delete;
  // Closes the listeners and every socket still waiting for its hello.
  ~AcceptRouter();

  void keep(Listener listener) { listeners_.push_back(std::move(listener)); }
  // An accepted TCP stream: its socket is taken out of it and peeked.
  void take(Stream stream);

 private:
  struct Pending {
    WatchId watch = 0;
    TimerId timer = 0;
    std::uint64_t serial = 0;  // order of arrival (order_)
    Lease lease;               // dropped with the socket, or handed on with it
  };
  void on_readable(int fd);
  // Stops watching `fd` and closes it (counted as `why`), or, why null, returns its lease
  // for the handoff.
  Lease finish(int fd, Counter* why);
  void evict_oldest();
  bool current(const std::pair<int, std::uint64_t>& entry) const;

  EventLoop& loop_;
  Duration timeout_;
  Handoff handoff_;
  Counter& routed_;
  Counter& timeouts_;
  Counter& closed_;
  Counter& malformed_;
  Counter& unroutable_;
  Counter& evicted_;
  std::size_t max_waiting_;
  std::vector<Listener> listeners_;
  std::unordered_map<int, Pending> pending_;
  // (fd, serial) in order of arrival; entries of sockets gone since are skipped (a reused
  // fd has a newer serial) and dropped when they reach the front or outnumber the live.
  std::deque<std::pair<int, std::uint64_t>> order_;
  std::uint64_t next_serial_ = 1;
  std::vector<std::byte> buf_;
};

}  // namespace rmsg::msg
