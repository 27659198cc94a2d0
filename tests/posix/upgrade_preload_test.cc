// The upgrade under rmsg-run (Soft-RoCE guest): two runs of a plain program
// (upgrade_probe.c), a server and a client, both under the preload with RMSG_UPGRADE=on
// (the preload dlopen()s librmsg-upgrade.so), on the guest's RDMA address. The programs
// check every byte; the stats lines must say the bytes after the cut-over went over RDMA.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

pid_t spawn(const std::vector<std::string>& args, int stdout_fd, int stdin_fd = -1,
            int stderr_fd = -1) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stdout_fd, 1);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
  if (stderr_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stderr_fd, 2);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int exit_status(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string field(const std::string& line, const std::string& key) {
  auto at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return "";
  at += key.size() + 3;
  return line.substr(at, line.find_first_of(",}", at) - at);
}

// One pair: the server (upgrade_probe server ADDR END) and the client under rmsg-run
// --stats with RMSG_UPGRADE=on. Both exit statuses must be 0 (every byte checked by the
// programs); returns the stats lines.
std::vector<std::string> run_pair(const std::string& server_end) {
  std::vector<std::string> lines;
  const char* addr = std::getenv("RMSG_RDMA_ADDR");
  EXPECT_NE(addr, nullptr) << "RMSG_RDMA_ADDR unset: run in the Soft-RoCE guest";
  if (addr == nullptr) return lines;
  char stats[] = "/tmp/rmsg-upgrade-stats-XXXXXX";
  int sfd = mkstemp(stats);
  EXPECT_GE(sfd, 0);
  close(sfd);
  setenv("RMSG_UPGRADE", "on", 1);
  int out[2];
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);  // the children hold only the ends they get
  int server_in[2];
  EXPECT_EQ(pipe2(server_in, O_CLOEXEC), 0);
  pid_t server = spawn({RMSG_RUN, "--stats", stats, RMSG_UPGRADE_PROBE, "server", addr, server_end},
                       out[1], server_in[0]);
  close(server_in[0]);
  close(out[1]);
  std::string port;
  char ch = 0;
  while (read(out[0], &ch, 1) == 1 && ch != '\n') port += ch;  // the server's port line
  close(out[0]);
  EXPECT_FALSE(port.empty());
  // The client ping-pongs until its standard input ends, which happens once its engine
  // says (RMSG_UPGRADE_DEBUG, on stderr) that its attempt is over: the bulk then moves
  // after the cut-over, however long the guest takes to set the RDMA connection up.
  setenv("RMSG_UPGRADE_DEBUG", "1", 1);
  int in[2], err[2];
  EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(err, O_CLOEXEC), 0);
  pid_t client =
      spawn({RMSG_RUN, "--stats", stats, RMSG_UPGRADE_PROBE, "client", addr, port, "stdin"}, -1,
            in[0], err[1]);
  unsetenv("RMSG_UPGRADE_DEBUG");
  close(in[0]);
  close(err[1]);
  std::string said;
  while (said.find("connector result") == std::string::npos) {
    pollfd p{err[0], POLLIN, 0};
    if (poll(&p, 1, 30000) != 1 || read(err[0], &ch, 1) != 1) break;  // a deadline
    said += ch;
  }
  EXPECT_NE(said.find("connector result"), std::string::npos) << said;
  close(in[1]);
  // The server exits on its own ("close", "open") or once the client has read everything.
  if (server_end != "stdin") {
    EXPECT_EQ(exit_status(server), 0) << "server, end " << server_end;
  }
  EXPECT_EQ(exit_status(client), 0) << "client; server end " << server_end;
  close(server_in[1]);
  if (server_end == "stdin") {
    EXPECT_EQ(exit_status(server), 0);
  }
  close(err[0]);
  std::ifstream f(stats);
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  unlink(stats);
  return lines;
}

void expect_upgraded(const std::vector<std::string>& lines) {
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& l : lines) {
    std::printf("%s\n", l.c_str());
    EXPECT_EQ(field(l, "transport"), "\"rdma\"") << l;
    EXPECT_EQ(field(l, "fallback"), "null") << l;
    EXPECT_GT(std::atoll(field(l, "rdma_bytes_in").c_str()), 1 << 20) << l;
    EXPECT_GT(std::atoll(field(l, "rdma_bytes_out").c_str()), 1 << 20) << l;
  }
}

TEST(ShimUpgradePreload, TwoProgramsUnderRmsgRunMoveTheirBytesOverRdma) {
  expect_upgraded(run_pair("stdin"));
}

// The server writes its last 2 MiB, closes and exits at once: every byte still reaches
// the client (the exit waits, bounded, for the peer's transport to acknowledge them and
// the end of stream, as the kernel delivers a closed TCP socket's bytes).
TEST(ShimUpgradePreload, AWriterThatClosesAndExitsAtOnceLosesNoByte) {
  expect_upgraded(run_pair("close"));
}

// The same with the connection still open at exit: the exit closes it as the kernel would
// (bytes, then end of stream).
TEST(ShimUpgradePreload, AWriterThatExitsHoldingTheConnectionLosesNoByte) {
  expect_upgraded(run_pair("open"));
}

}  // namespace
