// The upgrade under rmsg-run (Soft-RoCE guest): two runs of a plain program
// (upgrade_probe.c), a server and a client, both under the preload with RMSG_UPGRADE=on
// (the preload dlopen()s librmsg-upgrade.so), on the guest's RDMA address. The programs
// check every byte; the stats lines must say the bytes after the cut-over went over RDMA.
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

pid_t spawn(const std::vector<std::string>& args, int stdout_fd) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stdout_fd, 1);
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

TEST(ShimUpgradePreload, TwoProgramsUnderRmsgRunMoveTheirBytesOverRdma) {
  const char* addr = std::getenv("RMSG_RDMA_ADDR");
  ASSERT_NE(addr, nullptr) << "RMSG_RDMA_ADDR unset: run in the Soft-RoCE guest";
  char stats[] = "/tmp/rmsg-upgrade-stats-XXXXXX";
  int sfd = mkstemp(stats);
  ASSERT_GE(sfd, 0);
  close(sfd);
  setenv("RMSG_UPGRADE", "on", 1);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t server = spawn({RMSG_RUN, "--stats", stats, RMSG_UPGRADE_PROBE, "server", addr}, out[1]);
  close(out[1]);
  std::string port;
  char ch = 0;
  while (read(out[0], &ch, 1) == 1 && ch != '\n') port += ch;  // the server's port line
  close(out[0]);
  ASSERT_FALSE(port.empty());
  pid_t client =
      spawn({RMSG_RUN, "--stats", stats, RMSG_UPGRADE_PROBE, "client", addr, port, "3000"}, -1);
  EXPECT_EQ(exit_status(client), 0);
  EXPECT_EQ(exit_status(server), 0);
  std::ifstream f(stats);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  unlink(stats);
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& l : lines) {
    std::printf("%s\n", l.c_str());
    EXPECT_EQ(field(l, "transport"), "\"rdma\"") << l;
    EXPECT_EQ(field(l, "fallback"), "null") << l;
    EXPECT_GT(std::atoll(field(l, "rdma_bytes_in").c_str()), 1 << 20) << l;
    EXPECT_GT(std::atoll(field(l, "rdma_bytes_out").c_str()), 1 << 20) << l;
  }
}

}  // namespace
