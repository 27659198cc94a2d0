// The preload library under real programs' conditions: each scenario of posix_probe runs
// once without the shim and once under rmsg-run; both must pass the same kernel-semantics
// checks, and the shimmed run must write exactly the RMSG_STATS lines the probe expects.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace {

struct Outcome {
  bool exited = false;
  int code = -1;    // exit status when exited
  int signal = 0;   // terminating signal otherwise
  std::string out;  // stdout
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string temp_path(const char* what) {
  char p[] = "/tmp/rmsg-posix-XXXXXX";
  int fd = mkstemp(p);
  EXPECT_GE(fd, 0);
  close(fd);
  unlink(p);
  return std::string(p) + "-" + what;
}

// Runs argv with extra environment entries; kills it after `limit_s` (a hang fails).
// `started` runs in the parent once the child exists.
Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            int limit_s = 60, const std::function<void()>& started = nullptr) {
  std::string out_path = temp_path("stdout");
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (started) started();
  Outcome o;
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  EXPECT_GE(pidfd, 0);
  pollfd p{pidfd, POLLIN, 0};
  if (poll(&p, 1, limit_s * 1000) != 1) {
    ADD_FAILURE() << argv.back() << ": still running after " << limit_s << " s (a hang)";
    kill(pid, SIGKILL);
  }
  close(pidfd);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  o.exited = WIFEXITED(status);
  o.code = o.exited ? WEXITSTATUS(status) : -1;
  o.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  o.out = slurp(out_path);
  unlink(out_path.c_str());
  return o;
}

using Line = std::tuple<long, unsigned long long, unsigned long long>;  // pid, in, out

long field(const std::string& line, const std::string& key) {
  auto at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::strtol(line.c_str() + at + key.size() + 3, nullptr, 10);
}

// The stats file's lines, each checked for the fields every line must carry.
std::vector<Line> stats_lines(const std::string& path) {
  std::vector<Line> lines;
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);) {
    EXPECT_EQ(l.front(), '{') << l;
    EXPECT_EQ(l.back(), '}') << l;
    EXPECT_NE(l.find("\"transport\":\"tcp\""), std::string::npos) << l;
    EXPECT_NE(l.find("\"fallback\":"), std::string::npos) << l;
    bool v4 = l.find("\"peer\":\"127.0.0.1:") != std::string::npos;
    bool v6 = l.find("\"peer\":\"[::1]:") != std::string::npos;
    EXPECT_TRUE(v4 || v6) << l;
    lines.emplace_back(field(l, "pid"), field(l, "bytes_in"), field(l, "bytes_out"));
  }
  return lines;
}

struct Expected {
  std::vector<Line> lines;
  int count = -1;
};

Expected expected_of(const std::string& out) {
  Expected e;
  std::istringstream s(out);
  for (std::string l; std::getline(s, l);) {
    long pid = 0;
    unsigned long long in = 0, outb = 0;
    int n = 0;
    if (std::sscanf(l.c_str(), "expect pid=%ld in=%llu out=%llu", &pid, &in, &outb) == 3) {
      e.lines.emplace_back(pid, in, outb);
    } else if (std::sscanf(l.c_str(), "expect-count %d", &n) == 1) {
      e.count = n;
    }
  }
  return e;
}

bool is_fortify(const std::string& s) {
  return s.rfind("fortify_", 0) == 0;
}

class PosixPreload : public testing::TestWithParam<const char*> {};

// The answers every run of a scenario must give: a clean exit, or glibc's abort for the
// fortify scenarios.
void expect_kernel_answers(const std::string& scenario, const Outcome& o, const char* how) {
  if (is_fortify(scenario)) {  // glibc's check fails the same way under the shim
    EXPECT_EQ(o.signal, SIGABRT) << how;
    return;
  }
  EXPECT_TRUE(o.exited && o.code == 0)
      << how << ": exit " << o.code << " signal " << o.signal << "\n"
      << o.out;
}

TEST_P(PosixPreload, SameAnswersWithAndWithoutTheShimAndExactStats) {
  const std::string scenario = GetParam();
  Outcome plain = run({RMSG_POSIX_PROBE, scenario}, {});
  std::string stats = temp_path("stats");
  Outcome shim = run({RMSG_RUN, "--stats", stats, RMSG_POSIX_PROBE, scenario}, {});
  expect_kernel_answers(scenario, plain, "without the shim");
  expect_kernel_answers(scenario, shim, "under the shim with RMSG_STATS");
  if (is_fortify(scenario) || !plain.exited || plain.code != 0 || !shim.exited || shim.code != 0) {
    unlink(stats.c_str());
    return;
  }
  std::vector<Line> got = stats_lines(stats);
  Expected want = expected_of(shim.out);
  if (want.count >= 0) {
    EXPECT_EQ(static_cast<int>(got.size()), want.count) << slurp(stats);
  }
  std::multiset<Line> have(got.begin(), got.end());
  for (const Line& l : want.lines) {
    auto it = have.find(l);
    EXPECT_NE(it, have.end()) << "no stats line pid=" << std::get<0>(l) << " in=" << std::get<1>(l)
                              << " out=" << std::get<2>(l) << " in:\n"
                              << slurp(stats);
    if (it != have.end()) have.erase(it);
  }
  unlink(stats.c_str());
}

// The same scenario under the shim without RMSG_STATS (the table then holds nothing until
// the program's first socket: what most runs of rmsg-run look like), and with the shim
// loaded but switched off.
TEST_P(PosixPreload, SameAnswersWithoutStatsAndSwitchedOff) {
  const std::string scenario = GetParam();
  Outcome bare = run({RMSG_RUN, RMSG_POSIX_PROBE, scenario}, {});
  expect_kernel_answers(scenario, bare, "under the shim without RMSG_STATS");
  Outcome off = run({RMSG_RUN, "--off", RMSG_POSIX_PROBE, scenario}, {});
  expect_kernel_answers(scenario, off, "under the shim switched off");
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, PosixPreload,
    testing::Values("echo", "sigpipe", "non_tcp", "options", "poll_level", "epoll_level",
                    "epoll_edge", "epoll_oneshot", "epoll_nested", "epoll_asleep",
                    "connect_pending", "connect_refused", "dup", "close_range", "stats_descriptor",
                    "fork_server", "fork_child_closes", "exit_with_open", "vfork_spawn",
                    "signal_longjmp", "threads", "closefrom_early", "stats_raw_close_listener",
                    "stats_raw_close_reused", "stdio_closed", "bad_pointers", "raw_fork",
                    "close_range_unshare", "splice_and_sendfile", "fifo_reader_gone",
                    "fortify_read", "fortify_recv", "fortify_recvfrom", "fortify_poll",
                    "fortify_ppoll"),
    [](const testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

TEST(PosixPreloadSwitch, OffPassesEverythingThroughAndWritesNoStats) {
  std::string stats = temp_path("stats");
  Outcome o = run({RMSG_RUN, "--off", "--stats", stats, RMSG_POSIX_PROBE, "echo"}, {});
  ASSERT_TRUE(o.exited && o.code == 0);
  EXPECT_NE(access(stats.c_str(), F_OK), 0) << "RMSG_PRELOAD=off wrote " << slurp(stats);
  Outcome env =
      run({RMSG_RUN, RMSG_POSIX_PROBE, "echo"}, {"RMSG_PRELOAD=off", "RMSG_STATS=" + stats});
  ASSERT_TRUE(env.exited && env.code == 0);
  EXPECT_NE(access(stats.c_str(), F_OK), 0);
}

TEST(PosixPreloadSwitch, ProbeListMatchesTheInstantiatedScenarios) {
  Outcome o = run({RMSG_POSIX_PROBE, "--list"}, {});
  ASSERT_TRUE(o.exited && o.code == 0);
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 35);
}

// The library exports exactly the names of exports.map: the interposed calls.
TEST(PosixPreloadExports, OnlyTheInterposedNames) {
  std::string listing = temp_path("nm");
  std::string cmd = std::string("nm -D --defined-only ") + RMSG_PRELOAD_LIB + " > " + listing;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::set<std::string> exported;
  std::ifstream f(listing);
  for (std::string addr, type, name; f >> addr >> type >> name;) exported.insert(name);
  unlink(listing.c_str());
  std::set<std::string> mapped;
  std::string map = slurp(RMSG_PRELOAD_MAP);
  auto from = map.find("global:"), to = map.find("local:");
  ASSERT_NE(from, std::string::npos);
  std::istringstream names(map.substr(from + 7, to - from - 7));
  for (std::string n; names >> n;) {
    n.erase(std::remove(n.begin(), n.end(), ';'), n.end());
    if (!n.empty()) mapped.insert(n);
  }
  EXPECT_EQ(exported, mapped);
  EXPECT_EQ(mapped.size(), 47u);
  EXPECT_EQ(exported.count("rmsg_read"), 0u);
}

}  // namespace

namespace {

// Start-up survives re-entry: the hooks call the shim's own socket/read/close from inside
// its start, before the C library's calls are resolved and after (they pass through),
// start a thread whose socket() waits for the end, and fork a child whose socket() must
// not wait for a start that never ends there.
TEST(PosixPreloadStart, CallsFromInsideTheStartPassThrough) {
  std::string stats = temp_path("stats");
  Outcome o =
      run({RMSG_POSIX_PROBE, "echo"},
          {std::string("LD_PRELOAD=") + RMSG_PRELOAD_START_HOOK_LIB, "RMSG_STATS=" + stats});
  ASSERT_TRUE(o.exited) << "signal " << o.signal;
  ASSERT_EQ(o.code, 0);
  EXPECT_NE(o.out.find("phase one hook: re-entered socket, read, close"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("start hook: re-entered socket, read, close; a fork child did not wait"),
            std::string::npos)
      << o.out;
  EXPECT_EQ(stats_lines(stats).size(), 2u);  // and the shim works afterwards
  unlink(stats.c_str());
}

}  // namespace

namespace {

// The stats file is a FIFO whose reader leaves before the lines come: the shim's writes
// fail with EPIPE and the program sees no SIGPIPE (it would die of it).
TEST(PosixPreloadStats, AFifoWhoseReaderLeftRaisesNoSigpipe) {
  std::string fifo = temp_path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // there when the shim opens
  int sync[2];
  ASSERT_GE(reader, 0);
  ASSERT_EQ(pipe(sync), 0);
  Outcome o =
      run({RMSG_RUN, "--stats", fifo, RMSG_POSIX_PROBE, "fifo_reader_gone"},
          {"PROBE_READER_FD=" + std::to_string(reader), "PROBE_SYNC_FD=" + std::to_string(sync[0])},
          60, [&] {
            close(reader);  // the child's copy is the last reader now
            EXPECT_EQ(write(sync[1], "x", 1), 1);
          });
  close(sync[0]);
  close(sync[1]);
  EXPECT_TRUE(o.exited && o.code == 0) << "exit " << o.code << " signal " << o.signal;
  unlink(fifo.c_str());
}

// A FIFO nobody reads: the program starts anyway (no stats), instead of blocking in the
// shim's open.
TEST(PosixPreloadStats, AFifoWithoutReaderDoesNotBlockTheStart) {
  std::string fifo = temp_path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Outcome o = run({RMSG_RUN, "--stats", fifo, RMSG_POSIX_PROBE, "echo"}, {}, 10);
  EXPECT_TRUE(o.exited && o.code == 0) << "exit " << o.code << " signal " << o.signal;
  unlink(fifo.c_str());
}

// A symlink planted at the stats path is not followed (O_NOFOLLOW): nothing is appended
// to its target, and the program runs.
TEST(PosixPreloadStats, ASymlinkAtThePathIsNotFollowed) {
  std::string target = temp_path("target");
  std::string link = temp_path("link");
  { std::ofstream(target.c_str()) << ""; }
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  Outcome o = run({RMSG_RUN, "--stats", link, RMSG_POSIX_PROBE, "echo"}, {});
  EXPECT_TRUE(o.exited && o.code == 0);
  EXPECT_EQ(slurp(target), "");
  unlink(link.c_str());
  unlink(target.c_str());
}

}  // namespace
