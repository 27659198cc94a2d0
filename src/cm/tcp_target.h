// TcpTarget (behind a TCP AcceptTarget): how a listener's loop hands an accepted TCP
// socket to another loop's connection manager (ConnectionManager::accept_routed with TCP
// params; the twin of RDMA's TargetState, accept_target.h). The one object of the TCP path
// that crosses threads: the target's manager opens it (any thread: accept_routed for TCP
// only opens it) and closes it (its loop, when it goes); any thread may hand sockets to
// it, which posts them to the target loop (EventLoop::post), nothing else.
//
// A socket posted and never run (the target loop destroyed first) is closed and its lease
// released with the task: nothing leaks (tcp::OwnedSocket).
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "base/lease.h"
#include "rmsg/connection_manager.h"
#include "rmsg/event_loop.h"
#include "rmsg/result.h"
#include "tcp/tcp_socket.h"

namespace rmsg::cm {

class TcpTarget {
 public:
  // Runs on the target loop with a handed-off socket (unread) and its lease.
  using Adopt = std::function<void(tcp::OwnedSocket socket, Lease lease)>;

  explicit TcpTarget(EventLoop& loop) : loop_(&loop) {}
  // Hand-offs are taken (by `adopt`, on the target loop) / refused from now on. close()
  // is final.
  void open(Adopt adopt);
  void close();
  // Any thread. On success the socket and the lease are moved out (posted to the target
  // loop). Errc::cancelled when the target is closed or was never opened: both are left
  // with the caller.
  Result<void> hand_off(tcp::OwnedSocket& socket, Lease& lease);

 private:
  std::mutex mutex_;
  EventLoop* loop_;               // null once closed
  std::shared_ptr<Adopt> adopt_;  // null until opened
};

// The public handle's TCP face inside the library.
struct TcpTargetAccess {
  static AcceptTarget make(std::shared_ptr<TcpTarget> target) {
    return AcceptTarget(std::move(target));
  }
  static const std::shared_ptr<TcpTarget>& target(const AcceptTarget& t) { return t.tcp_; }
};

}  // namespace rmsg::cm
