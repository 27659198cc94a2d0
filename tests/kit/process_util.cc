#include "kit/process_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace rmsg::testing {

Child::Child(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  out_ = fds[0];
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0) close(out_);
}

std::string Child::read_line(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (auto nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return {};
    pollfd p{out_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[256];
    const ssize_t n = read(out_, buf, sizeof buf);
    if (n <= 0) return {};
    buffered_.append(buf, static_cast<std::size_t>(n));
  }
}

void Child::signal(int sig) {
  if (pid_ > 0 && !reaped_) kill(pid_, sig);
}

int Child::wait(int timeout_ms) {
  if (pid_ <= 0 || reaped_) return -1;
  // A pidfd becomes readable when the child exits: poll it, no sleeping.
  const int pfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  if (pfd >= 0) {
    pollfd p{pfd, POLLIN, 0};
    poll(&p, 1, timeout_ms);
    close(pfd);
  }
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return -1;
  reaped_ = true;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string helper_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "rdma_peer_helper";
  std::string self(buf, static_cast<std::size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "rdma_peer_helper";
}

}  // namespace rmsg::testing
