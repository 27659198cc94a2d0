#include "kit/verbs_census.h"

#include <unistd.h>

#include <cstdio>
#include <iterator>
#include <regex>

namespace rmsg::testing {
namespace {}  // namespace

int verbs_objects(const char* kind, std::string* why) {
  const std::string cmd = std::string("rdma -j res show ") + kind + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    if (why) *why = "cannot run: " + cmd;
    return -1;
  }
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  if (pclose(f) != 0 || out.empty() || out[0] != '[') {
    if (why) *why = cmd + ": " + out.substr(0, 300);
    return -1;
  }
  const std::regex pid_re("\"pid\":" + std::to_string(getpid()) + "[,}]");
  return static_cast<int>(
      std::distance(std::sregex_iterator(out.begin(), out.end(), pid_re), std::sregex_iterator()));
}

std::string Census::to_string() const {
  return "qp " + std::to_string(qp) + ", cq " + std::to_string(cq) + ", mr " + std::to_string(mr);
}

Census take_census(std::string* why) {
  return Census{verbs_objects("qp", why), verbs_objects("cq", why), verbs_objects("mr", why)};
}

}  // namespace rmsg::testing
