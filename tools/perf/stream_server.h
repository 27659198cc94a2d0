// The server side of a perf run over any rmsg Stream: each accepted stream reads a
// WireHeader, then echoes (lat) or swallows and acks (bw) until the client hangs up.
// Loop-thread-only, like the streams it serves.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "rmsg/event_loop.h"
#include "rmsg/stream.h"

namespace rmsg::perf {

class StreamServer {
 public:
  explicit StreamServer(EventLoop& loop);
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;
  StreamServer(StreamServer&&) = delete;
  StreamServer& operator=(StreamServer&&) = delete;
  ~StreamServer();

  // Serves `stream` until its client closes it or breaks the protocol.
  void accept(Stream stream);
  std::size_t sessions() const { return sessions_.size(); }

  class Session;

 private:
  friend class Session;
  void finished(std::uint64_t id);

  EventLoop& loop_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::unique_ptr<Session>> sessions_;
  std::shared_ptr<StreamServer*> self_;  // deferred clean-ups hold it weakly
};

}  // namespace rmsg::perf
