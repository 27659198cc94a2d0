// AdminEndpoint: an opt-in Unix stream socket through which a running process shows what
// its Messenger holds, for operators and tools (rmsg-info --admin; docs/operations.md).
//
// Protocol: one request per connection, one line: "json" answers every msg.* counter
// (summed over the loops, and per loop) and every session (peer, loop, connected,
// transport, queue depths, in flight, delivered, connect_seq, authenticated) as one JSON
// object on one line; "prometheus" answers the same counters and session depths in the
// Prometheus text exposition format. Anything else answers one line {"error":"..."}. The
// server closes the connection after the answer (the answer ends at EOF).
//
// Cost: served on the messenger's loop 0, non-blocking. A request takes one snapshot per
// loop, each run on its loop as one posted task (a copy of its counters and the
// SessionInfo of each of its sessions), so no loop is held for longer than that; nothing
// is read while nobody asks. At most 16 clients at a time; more are closed at once.
//
// Security: the socket is made with mode 0600 (only the process's user connects). start()
// refuses a path whose directory group or others may write (they could replace the
// socket), and a path that exists and is not a socket; a socket there that nobody listens
// on (a crashed process's) is replaced, one that answers is refused (address in use).
//
// Threading: start() and the destructor on loop 0's thread (Messenger::loop()), or
// before the loops run. Destroy the endpoint before the messenger.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "rmsg/export.h"
#include "rmsg/loop_time.h"
#include "rmsg/messenger.h"
#include "rmsg/result.h"

namespace rmsg {

class RMSG_EXPORT AdminEndpoint {
 public:
  // Listens on `path`. Errors: Errc::invalid_argument (empty or longer than a Unix socket
  // path may be); EACCES (the directory is writable by group or others); EEXIST (the path
  // is not a socket); EADDRINUSE (a process answers on it); errno of socket/bind/listen.
  static Result<std::unique_ptr<AdminEndpoint>> start(Messenger& messenger,
                                                      const std::string& path);
  AdminEndpoint(const AdminEndpoint&) = delete;
  AdminEndpoint& operator=(const AdminEndpoint&) = delete;
  AdminEndpoint(AdminEndpoint&&) = delete;
  AdminEndpoint& operator=(AdminEndpoint&&) = delete;
  // Closes the clients and the socket and removes the socket file.
  ~AdminEndpoint();

  const std::string& path() const noexcept;

  class RMSG_HIDDEN Impl;

 private:
  explicit AdminEndpoint(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// The client side (rmsg-info --admin): connects to `path`, sends `request` and a newline,
// and returns everything the endpoint answers until it closes. Blocks the calling thread
// (never call it on a loop thread of the same process's messenger) for at most `timeout`.
// Errors: errno of socket/connect/read/write (ENOENT, ECONNREFUSED, EACCES...);
// Errc::timeout; Errc::invalid_argument (a path too long).
RMSG_EXPORT Result<std::string> admin_request(const std::string& path, std::string_view request,
                                              Duration timeout);

}  // namespace rmsg
