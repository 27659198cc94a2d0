// rmsg-perf's core types: what one measurement is (Spec), what it yields (Measurement),
// and the Runner interface every transport or baseline implements.
//
// Runners: a stream transport (tcp now, rdma when plugged in) becomes a Runner through
// make_stream_runner() (stream_runner.cc); a baseline with its own I/O (posix sockets, a
// raw verbs ping-pong later) implements Runner directly and registers a factory.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "rmsg/address.h"
#include "rmsg/loop_threads.h"
#include "rmsg/result.h"

namespace rmsg::perf {

enum class Test { lat = 1, bw = 2 };
const char* to_string(Test t);

struct Spec {
  Test test = Test::lat;
  std::uint64_t size = 64;   // bytes per message
  std::uint64_t iters = 0;   // measured messages (lat: round trips)
  std::uint64_t warmup = 0;  // unmeasured messages sent first
};

struct Measurement {
  // lat: one-way latency per round trip (half the round trip); bw: the interval between
  // successive messages being accepted by the sender's transport.
  std::vector<double> samples_ns;
  double elapsed_s = 0;  // lat: all measured round trips; bw: first measured byte to ack
};

struct RunOptions {
  bool busy_poll = false;          // EventLoop::set_busy_poll on every loop a runner drives
  long poll_spin_us = -1;          // EventLoopOptions::poll_spin of those loops; -1: default
  bool one_thread = false;         // server and client on one loop thread (stream runners)
  std::string host = "127.0.0.1";  // in-process server address
  bool counters = false;           // print the transport's counters after each measurement
  std::uint32_t block_count = 0;   // rdma: ring blocks each way (0: RdmaOptions' default)
  std::uint32_t block_size = 0;    // rdma: bytes per block (0: RdmaOptions' default)
  int server_cpu = -1;             // --cpus: the CPU a server's thread is pinned to; -1: none
  long setup_calls = -1;           // rdma: max_setup_calls_per_iteration; -1: RdmaOptions'
  // rdma: RdmaOptions::shared_receive with a pool admitting this many streams; 0: off
  std::uint32_t shared_connections = 0;
};

// --cpus: pins the calling server thread to RunOptions::server_cpu, when one is set (main
// checked that the process may use it).
inline void pin_server_thread(const RunOptions& o) {
  if (o.server_cpu < 0) return;
  if (auto r = pin_this_thread(o.server_cpu); !r) {
    std::fprintf(stderr, "rmsg-perf: server thread not pinned: %s\n", r.error().message().c_str());
  }
}

// Prints "label: done/total" on stderr about once a second once a run passes 2 s.
class Progress {
 public:
  explicit Progress(std::string label);
  void update(std::uint64_t done, std::uint64_t total) {
    if ((done & 255) == 0) maybe_print(done, total);
  }

 private:
  void maybe_print(std::uint64_t done, std::uint64_t total);
  std::string label_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

// A server running on its own thread (or on the runner's loop); destroying it stops it.
class Server {
 public:
  Server() = default;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  Server(Server&&) = delete;
  Server& operator=(Server&&) = delete;
  virtual ~Server() = default;
  virtual std::uint16_t port() const = 0;
};

class Runner {
 public:
  Runner() = default;
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  Runner(Runner&&) = delete;
  Runner& operator=(Runner&&) = delete;
  virtual ~Runner() = default;

  virtual std::string name() const = 0;
  // Starts serving at `address` (port 0: any); returns once it accepts connections.
  virtual Result<std::unique_ptr<Server>> start_server(const SocketAddress& address) = 0;
  // One measurement as the client of the server at `address`, on the calling thread.
  virtual Result<Measurement> run(const SocketAddress& address, const Spec& spec,
                                  Progress& progress) = 0;
};

// Baselines (and other non-stream runners) register a factory under their name.
using RunnerFactory = std::unique_ptr<Runner> (*)(const RunOptions&);
bool register_runner(const char* name, RunnerFactory factory);
RunnerFactory find_runner(const std::string& name);
std::vector<std::string> runner_names();

}  // namespace rmsg::perf
