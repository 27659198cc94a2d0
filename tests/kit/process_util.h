// Helpers for RDMA tests that involve other processes or the kernel's view of this one:
// a child process (fork/exec, killed on destruction), the helper binary's path, and the
// verbs objects this process holds according to `rdma res show`.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace rmsg::testing {

class Child {
 public:
  // fork + execv(argv[0], argv); stdout goes to a pipe read by read_line().
  explicit Child(const std::vector<std::string>& argv);
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();  // SIGKILL and reap if still running

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  // Waits (with a deadline in ms) for one line of the child's stdout; empty on EOF/timeout.
  std::string read_line(int timeout_ms);
  void signal(int sig);
  // Reaps the child, waiting up to timeout_ms; its exit status, 128+signal, or -1.
  int wait(int timeout_ms);

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffered_;
  bool reaped_ = false;
};

// The path of rdma_peer_helper, built next to the test binary.
std::string helper_path();

}  // namespace rmsg::testing
