// RelayPump: loop 0's end of a relayed connection (relay_channel.h): it keeps the real
// stream and moves bytes between it and the channel, reading only while the pipe toward
// the owner has room (so a owner that stops reading stops the peer through the
// transport's own flow control) and writing what the owner queued, after `pending` (the
// bytes loop 0's handshake queued and the stream had not taken yet). The owner's
// shutdown_write() and close become the real stream's (graceful after a shutdown,
// abortive without); the real stream's EOF and failures reach the owner after its bytes.
// `done` is called (deferred) once nothing is left to do; the pump is then destroyed by
// its holder. Destroying it earlier (loop 0's shard shutting down) resets the connection.
//
// Threading: loop 0's thread.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "msg/relay_channel.h"
#include "rmsg/stream.h"

namespace rmsg::msg {

class RelayPump {
 public:
  RelayPump(Stream real, std::shared_ptr<RelayChannel> channel, std::vector<std::byte> pending,
            std::function<void()> done);
  RelayPump(const RelayPump&) = delete;
  RelayPump& operator=(const RelayPump&) = delete;
  RelayPump(RelayPump&&) = delete;
  RelayPump& operator=(RelayPump&&) = delete;
  ~RelayPump();

 private:
  void run();
  void inbound();   // real stream -> owner
  void outbound();  // owner -> real stream
  void finish();

  Stream real_;
  std::shared_ptr<RelayChannel> channel_;
  std::vector<std::byte> out_;  // pulled from the owner (or pending), not yet written
  std::size_t out_off_ = 0;
  std::function<void()> done_;
  bool in_done_ = false;   // the real stream ended or failed: reported to the owner
  bool out_done_ = false;  // the owner's end was passed on (shutdown or reset)
  bool finished_ = false;
  bool running_ = false;
  bool again_ = false;
};

}  // namespace rmsg::msg
