// rmsg-perf's command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "perf.h"

namespace rmsg::perf {

struct Options {
  std::vector<Test> tests;         // empty: lat then bw
  bool connect_test = false;       // --test connect (connect_test.h)
  std::string transport = "auto";  // tcp | rdma | auto | posix | verbs
  std::string baseline;            // a registered runner, "none"; empty: verbs for rdma, else posix
  bool counters = false;           // print the transport's counters after each result
  std::vector<std::uint64_t> sizes;  // empty: defaults per test
  std::uint64_t iters = 0;           // 0: a default per test and size
  std::uint64_t repeat = 3;          // rounds per size; the median round of each is reported
  bool json = false;
  bool busy_poll = false;
  long poll_spin_us = -1;  // --poll-spin US: EventLoopOptions::poll_spin; -1: its default
  bool one_thread = false;
  std::uint32_t block_count = 0;  // --blocks COUNTxSIZE (rdma ring geometry); 0: default
  std::uint32_t block_size = 0;
  int client_cpu = -1;  // --cpus CLIENT,SERVER: thread placement; -1: the scheduler's
  int server_cpu = -1;
  std::string server;   // --server ADDR:PORT
  std::string connect;  // --connect ADDR:PORT
  std::string host;     // --address HOST (in-process runs)
  bool help = false;

  // --test rpc (rpc_test.h): the RPC benchmark; --outstanding its depths (1,16,128).
  bool rpc_test = false;
  bool failover_test = false;  // --test failover (failover_test.h; RDMA builds)
  // --test scale (scale_test.h): --connections N, at most --window connects in flight.
  bool scale_test = false;
  std::size_t connections = 100;
  std::size_t window = 16;
  long setup_calls = -1;        // --setup-calls N: RdmaOptions::max_setup_calls_per_iteration
  bool shared_receive = false;  // --shared-receive: RdmaOptions::shared_receive
  std::vector<std::uint64_t> outstanding;
};

// Parses argv; on a usage error returns false with `error` set.
bool parse_options(int argc, char** argv, Options& options, std::string& error);
void print_usage(std::FILE* out);

// The sizes a test runs when --size is absent, and the iterations per size.
std::vector<std::uint64_t> default_sizes(Test test);
Spec make_spec(Test test, std::uint64_t size, std::uint64_t iters_option);

}  // namespace rmsg::perf
