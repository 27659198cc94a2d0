// StreamCounters: the counters of one RDMA stream. The stream's loop thread is their one
// writer, so a count on the data path is a relaxed load and store (Counter::add_owned), not
// an atomic read-modify-write. The device's totals (rdma_device_counter) are summed when
// read, over the live streams of that device and what closed ones left behind: a shared
// per-device counter bumped per message made the client's and the server's loop threads
// bounce one cache line per message, with a locked instruction each time.
#pragma once

#include <string>

#include "rmsg/counters.h"

namespace rmsg::rdma {

class StreamCounters {
 public:
  // Registers with the device's totals (every counter below exists by then).
  explicit StreamCounters(const std::string& device);
  StreamCounters(const StreamCounters&) = delete;
  StreamCounters& operator=(const StreamCounters&) = delete;
  StreamCounters(StreamCounters&&) = delete;
  StreamCounters& operator=(StreamCounters&&) = delete;
  // Adds this stream's counts to its device's totals.
  ~StreamCounters();

  // One counter of the stream, counted by its loop thread.
  struct Owned {
    Counter& counter;
    void add(std::uint64_t n = 1) noexcept { counter.add_owned(n); }
  };

  const CounterSet& set() const noexcept { return set_; }
  const std::string& device_name() const noexcept { return device_name_; }
  // A work completion with an error status: "wc_error.<status>" (and RNR retries
  // exceeded also as "rnr_retry_exceeded"); flushes after a local QP error are counted
  // as "wc_flushed" instead.
  void wc_error(int status);
  // An asynchronous device event that concerned this stream: "async_event.<type>".
  void async_event(int type);

 private:
  Owned owned(const char* name) { return Owned{set_.counter(name)}; }
  CounterSet set_;
  std::string device_name_;

 public:
  Owned bytes_sent = owned("bytes_sent");
  Owned bytes_received = owned("bytes_received");
  Owned messages_sent = owned("messages_sent");  // data messages
  Owned messages_received = owned("messages_received");
  Owned control_sent = owned("control_messages_sent");  // credit, FIN, keepalive
  Owned keepalives_sent = owned("keepalives_sent");
  Owned keepalives_received = owned("keepalives_received");
  Owned probes_sent = owned("probes_sent");      // zero-length RDMA WRITEs of a stalled writer
  Owned credit_stalls = owned("credit_stalls");  // writes that stopped for lack of credits
  Owned write_would_block = owned("write_would_block");
  Owned bytes_staged = owned("bytes_staged");  // written while no SEND could go: staged
  Owned inline_sends = owned("inline_sends");  // posted inline from the caller's bytes
  Owned read_would_block = owned("read_would_block");
  Owned idle_timeouts = owned("idle_timeouts");
  Owned wc_flushed = owned("wc_flushed");
  Owned rnr_retry_exceeded = owned("rnr_retry_exceeded");
};

}  // namespace rmsg::rdma
