// The probe's scenarios, by group (probe_io.cc, probe_readiness.cc, probe_options.cc,
// probe_process.cc, probe_fortify.cc). Each returns normally when every check held.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace probe {

// One stats line the shim must write (pid, bytes_in, bytes_out).
inline void expect_line(pid_t pid, std::uint64_t in, std::uint64_t out) {
  std::printf("expect pid=%d in=%llu out=%llu\n", static_cast<int>(pid),
              static_cast<unsigned long long>(in), static_cast<unsigned long long>(out));
}
inline void expect_count(int n) {
  std::printf("expect-count %d\n", n);
}

void echo();
void sigpipe();
void non_tcp();
void options();
void poll_level();
void epoll_level();
void epoll_edge();
void epoll_oneshot();
void epoll_nested();
void epoll_asleep();
void connect_pending();
void connect_refused();
void dup_shares();
void close_range_keeps_private();
void stats_descriptor_guarded();
void fork_server();
void fork_child_closes();
void exit_with_open();
void vfork_spawn();
void signal_longjmp();
void threads();
void closefrom_early();
void stats_raw_close_listener();
void stats_raw_close_reused();
void stdio_closed();
void bad_pointers();
void raw_fork();
void close_range_unshare();
void splice_and_sendfile();
void fifo_reader_gone();
void fortify_read();
void fortify_recv();
void fortify_recvfrom();
void fortify_poll();
void fortify_ppoll();

}  // namespace probe
