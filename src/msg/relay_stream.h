// RelayStream: the Stream an owner shard runs a relayed connection on (relay_channel.h).
// Its bytes cross to loop 0, where RelayPump moves them to and from the real stream: one
// copy and two thread hops each way. It reports the real stream's transport and
// addresses, and keeps the Stream contract's readiness rules (rmsg/stream.h): a callback
// is called when its condition becomes true (the other side pushed, pulled or ended) and
// again after a call that made progress.
// `skip`: the first bytes written are dropped, not sent: loop 0 already sent the banner
// the owner's handshake begins with (the same bytes: every shard sends Banner{}).
//
// Threading: the owner loop's thread, like any Stream.
#pragma once

#include <memory>
#include <string>

#include "loop/alive.h"
#include "msg/relay_channel.h"
#include "rmsg/stream.h"

namespace rmsg::msg {

struct RelayEnds {
  std::string transport;  // the real stream's: a string literal's lifetime is not needed
  std::string local_address;
  std::string peer_address;
};

class RelayStream final : public StreamImpl {
 public:
  RelayStream(EventLoop& loop, std::shared_ptr<RelayChannel> channel, RelayEnds ends,
              std::size_t skip);
  ~RelayStream() override;

  Result<std::size_t> write(std::span<const std::byte> data) override;
  Result<std::size_t> read(std::span<std::byte> buf) override;
  void on_readable(Task callback) override;
  void on_writable(Task callback) override;
  Result<void> shutdown_write() override;
  void close() override;
  std::error_code error() const override { return error_; }
  const char* transport() const override { return ends_.transport.c_str(); }
  std::string local_address() const override { return ends_.local_address; }
  std::string peer_address() const override { return ends_.peer_address; }
  EventLoop& loop() const override { return loop_; }

 private:
  void on_wake();
  void fail(std::error_code e) {
    if (!error_) error_ = e;
  }

  EventLoop& loop_;
  std::shared_ptr<RelayChannel> channel_;
  RelayEnds ends_;
  std::size_t skip_;
  Task readable_, writable_;
  bool read_armed_ = false, write_armed_ = false;
  bool end_seen_ = false;  // read() returned the EOF or the error once
  bool shut_ = false, closed_ = false;
  std::error_code error_;
  Alive<RelayStream> alive_{loop_, this};  // a callback may destroy us
};

}  // namespace rmsg::msg
