// The loopback stream's insides (kit/loopback.h is the interface): two pipes shared by
// the two ends of one connection (LoopbackLink), and the StreamImpl of one end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "rmsg/testing/loopback.h"

namespace rmsg::testing {

class LoopbackStream;

// One direction: what its writer wrote and its reader has not read yet.
struct LoopbackPipe {
  struct Chunk {
    std::vector<std::byte> bytes;
    std::size_t offset = 0;  // bytes of it already read
    std::uint64_t seq = 0;   // delivery order, for delayed chunks
    bool ready = true;       // delivered: readable (a delayed chunk is not, until its timer)
  };
  std::deque<Chunk> chunks;
  std::size_t capacity = 0;
  std::size_t queued = 0;  // bytes in chunks, delivered or not
  std::uint64_t next_seq = 0;
  bool fin = false;        // the writer shut down: EOF after the chunks
  bool fin_ready = false;  // ... and the EOF is delivered
  std::uint64_t fin_seq = 0;

  bool has_ready_bytes() const { return !chunks.empty() && chunks.front().ready; }
  bool at_eof() const { return chunks.empty() && fin_ready; }
  bool eof_delivered() const;  // EOF and every byte before it are readable
  std::size_t space() const { return capacity > queued ? capacity - queued : 0; }
  void deliver_up_to(std::uint64_t seq);
  void drop_undelivered();
  void clear();
};

struct LoopbackLink {
  explicit LoopbackLink(EventLoop& l) : loop(l) {}
  EventLoop& loop;
  LoopbackPipe pipe[2];                         // pipe[i] is written by end i, read by end 1 - i
  LoopbackStream* end[2] = {nullptr, nullptr};  // null once that end closed
};

class LoopbackStream final : public StreamImpl {
 public:
  LoopbackStream(std::shared_ptr<LoopbackLink> link, int side,
                 std::shared_ptr<LoopbackFaults> faults, std::string local, std::string peer);
  LoopbackStream(const LoopbackStream&) = delete;
  LoopbackStream& operator=(const LoopbackStream&) = delete;
  LoopbackStream(LoopbackStream&&) = delete;
  LoopbackStream& operator=(LoopbackStream&&) = delete;
  ~LoopbackStream() override;

  Result<std::size_t> write(std::span<const std::byte> data) override;
  Result<std::size_t> writev(std::span<const std::span<const std::byte>> parts) override;
  Result<std::size_t> read(std::span<std::byte> buf) override;
  void on_readable(Task callback) override;
  void on_writable(Task callback) override;
  Result<void> shutdown_write() override;
  void close() override;
  std::error_code error() const override;
  const char* transport() const override { return "loopback"; }
  std::string local_address() const override { return local_; }
  std::string peer_address() const override { return peer_; }
  EventLoop& loop() const override { return link_->loop; }

  // Called by the other end, a fault or a delivery timer.
  void fail(std::error_code ec);         // this end fails (an injected fault), the peer is reset
  void peer_failed(std::error_code ec);  // keeps what was delivered, drops the rest
  void peer_closed(bool graceful);       // the peer's close(): a reset, or EOF then peer_closed
  void schedule_notify();

 private:
  LoopbackPipe& out() { return link_->pipe[side_]; }
  LoopbackPipe& in() { return link_->pipe[1 - side_]; }
  LoopbackStream* peer() { return link_->end[1 - side_]; }
  Result<std::size_t> write_limit(std::size_t want);  // bytes a write may take now, or why not
  void arm_delivery(std::uint64_t seq, Duration delay);
  void append(std::vector<std::byte> bytes);
  bool readable_now() const;
  bool writable_now() const;

  std::shared_ptr<LoopbackLink> link_;
  int side_;
  std::shared_ptr<LoopbackFaults> faults_;
  std::string local_;
  std::string peer_;
  // A readiness direction (rmsg/stream.h's rule): armed until a call of its callback
  // changed nothing (no arming read()/write() ran in it); read()/write() results other
  // than a repeated EOF/error and setting the callback arm it again.
  struct Direction {
    Task callback;
    bool armed = true;
    std::uint64_t uses = 0;
  };
  void arm(Direction& d);
  // Returns an error value, arming both directions the first time it is reported.
  std::error_code report(std::error_code ec);
  Direction on_readable_;
  Direction on_writable_;
  bool error_reported_ = false;
  std::error_code error_;  // the first failure; sticky
  bool closed_ = false;
  bool write_shut_ = false;
  bool eof_read_ = false;
  bool peer_gone_ = false;  // the peer closed after its EOF reached us: writes fail
  bool notify_scheduled_ = false;
  std::size_t read_total_ = 0;
  std::size_t write_total_ = 0;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // deferred tasks check it
};

}  // namespace rmsg::testing
