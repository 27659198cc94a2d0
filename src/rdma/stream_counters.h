// StreamCounters: the counters of one RDMA stream, each paired with the same-named counter
// of its device's set (rdma_device_counters), so that both are bumped by one call on the
// data path (relaxed atomics; references resolved once, at creation).
#pragma once

#include <string>

#include "rmsg/counters.h"

namespace rmsg::rdma {

class StreamCounters {
 public:
  explicit StreamCounters(const std::string& device);
  StreamCounters(const StreamCounters&) = delete;
  StreamCounters& operator=(const StreamCounters&) = delete;
  StreamCounters(StreamCounters&&) = delete;
  StreamCounters& operator=(StreamCounters&&) = delete;
  ~StreamCounters() = default;

  struct Pair {
    Counter& stream;
    Counter& device;
    void add(std::uint64_t n = 1) noexcept {
      stream.add(n);
      device.add(n);
    }
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
  Pair pair(const char* name);
  CounterSet set_;
  CounterSet& device_;
  std::string device_name_;

 public:
  Pair bytes_sent = pair("bytes_sent");
  Pair bytes_received = pair("bytes_received");
  Pair messages_sent = pair("messages_sent");  // data messages
  Pair messages_received = pair("messages_received");
  Pair control_sent = pair("control_messages_sent");  // credit, FIN, keepalive
  Pair keepalives_sent = pair("keepalives_sent");
  Pair keepalives_received = pair("keepalives_received");
  Pair probes_sent = pair("probes_sent");      // zero-length RDMA WRITEs of a stalled writer
  Pair credit_stalls = pair("credit_stalls");  // writes that stopped for lack of credits
  Pair write_would_block = pair("write_would_block");
  Pair bytes_staged = pair("bytes_staged");  // written while no SEND could go: staged
  Pair read_would_block = pair("read_would_block");
  Pair idle_timeouts = pair("idle_timeouts");
  Pair wc_flushed = pair("wc_flushed");
  Pair rnr_retry_exceeded = pair("rnr_retry_exceeded");
};

}  // namespace rmsg::rdma
