// The timeline of a failover run (rmsg-perf --test failover): when each step of a switch
// happened, on the loop's clock, so the longest pause can be split into its parts. The
// milestones come from the tool's own vantage points (the QP_FATAL it routes, the
// connects its stream factory passes on, the session events, the call completions); the
// library's debug log lines (rmsg/log.h, recorded with their time) fill in what happens
// inside the library between them (verbs teardown and setup, handshake steps).
//
// Threading: the log handler may be called from any thread (it locks); everything else is
// the run's loop thread.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "rmsg/connection_manager.h"
#include "rmsg/loop_time.h"

namespace rmsg::perf {

class FailoverTrace {
 public:
  struct Mark {
    Clock::time_point at;
    std::string what;
  };
  // One switch to TCP and back, from the QP_FATAL on; unset times are time_point{}.
  struct Switch {
    Clock::time_point injected;      // QP_FATAL routed to the live RDMA stream's QP
    Clock::time_point failed;        // the session's `disconnected` event (its callback)
    Clock::time_point tcp_connect;   // the session's TCP connect asked of the factory
    Clock::time_point tcp_up;        // that stream connected
    Clock::time_point tcp_welcome;   // `switched` to TCP: the handshake's welcome
    Clock::time_point tcp_first;     // the first call completion after it
    Clock::time_point probe;         // the RDMA connect (probe) that brought RDMA back
    Clock::time_point probe_up;      // its stream connected
    Clock::time_point rdma_welcome;  // `switched` to RDMA
    Clock::time_point rdma_first;    // the first call completion after it
    double pause_to_tcp_ms = 0;      // the longest gap between completions ending by tcp_first
    double pause_to_rdma_ms = 0;     // ... ending in [probe, rdma_first + 50 ms]
  };

  // Records the library's log lines (debug and up) from now until destroyed.
  FailoverTrace();
  FailoverTrace(const FailoverTrace&) = delete;
  FailoverTrace& operator=(const FailoverTrace&) = delete;
  FailoverTrace(FailoverTrace&&) = delete;
  FailoverTrace& operator=(FailoverTrace&&) = delete;
  ~FailoverTrace();

  void injected(Clock::time_point at);
  void connect_started(Transport t, Clock::time_point at);
  void connect_done(Transport t, bool ok, Clock::time_point at);
  void disconnected(Clock::time_point at);
  void switched(Transport to, Clock::time_point at);

  // Builds the switches from the marks and `done_at` (every call completion, in order).
  std::vector<Switch> switches(const std::vector<Clock::time_point>& done_at) const;
  // Per switch: its milestones, then every mark and every gap over 2 ms between its
  // QP_FATAL and 50 ms after its first completion over RDMA, offsets from the QP_FATAL;
  // then the run's longest gap with the marks in it.
  void print(std::FILE* out, const std::vector<Clock::time_point>& done_at) const;

 private:
  void add(Clock::time_point at, std::string what);

  struct Connect {
    Transport transport;
    Clock::time_point start, done;
    bool ok = false;
  };
  std::vector<Clock::time_point> injected_;
  std::vector<Connect> connects_;
  std::vector<Clock::time_point> disconnected_;
  std::vector<std::pair<Transport, Clock::time_point>> switched_;
  mutable std::mutex mutex_;
  std::vector<Mark> marks_;  // log lines and the tool's own marks
};

}  // namespace rmsg::perf
