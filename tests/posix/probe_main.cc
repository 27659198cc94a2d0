// posix_probe SCENARIO: runs one scenario of plain socket calls (see probe_util.h) and
// exits 0 when every check held. Lines "expect pid=P in=I out=O" on stdout name the stats
// lines a run under the shim must produce; "expect-count N" their exact number.
#include <cstdio>
#include <cstring>

#include "posix/probe_scenarios.h"

namespace {

struct Scenario {
  const char* name;
  void (*run)();
};

const Scenario kScenarios[] = {
    {"echo", probe::echo},
    {"sigpipe", probe::sigpipe},
    {"non_tcp", probe::non_tcp},
    {"options", probe::options},
    {"poll_level", probe::poll_level},
    {"epoll_level", probe::epoll_level},
    {"epoll_edge", probe::epoll_edge},
    {"epoll_oneshot", probe::epoll_oneshot},
    {"epoll_nested", probe::epoll_nested},
    {"epoll_asleep", probe::epoll_asleep},
    {"connect_pending", probe::connect_pending},
    {"connect_refused", probe::connect_refused},
    {"dup", probe::dup_shares},
    {"close_range", probe::close_range_keeps_private},
    {"stats_descriptor", probe::stats_descriptor_guarded},
    {"fork_server", probe::fork_server},
    {"fork_child_closes", probe::fork_child_closes},
    {"exit_with_open", probe::exit_with_open},
    {"vfork_spawn", probe::vfork_spawn},
    {"signal_longjmp", probe::signal_longjmp},
    {"threads", probe::threads},
    {"closefrom_early", probe::closefrom_early},
    {"stats_raw_close_listener", probe::stats_raw_close_listener},
    {"stats_raw_close_reused", probe::stats_raw_close_reused},
    {"stdio_closed", probe::stdio_closed},
    {"bad_pointers", probe::bad_pointers},
    {"raw_fork", probe::raw_fork},
    {"close_range_unshare", probe::close_range_unshare},
    {"splice_and_sendfile", probe::splice_and_sendfile},
    {"fifo_reader_gone", probe::fifo_reader_gone},
    {"fortify_read", probe::fortify_read},
    {"fortify_recv", probe::fortify_recv},
    {"fortify_recvfrom", probe::fortify_recvfrom},
    {"fortify_poll", probe::fortify_poll},
    {"fortify_ppoll", probe::fortify_ppoll},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const auto& s : kScenarios) std::printf("%s\n", s.name);
    return 0;
  }
  for (const auto& s : kScenarios) {
    if (argc == 2 && std::strcmp(argv[1], s.name) == 0) {
      s.run();
      std::fflush(stdout);
      return 0;
    }
  }
  std::fprintf(stderr, "usage: posix_probe SCENARIO | --list\n");
  return 2;
}
