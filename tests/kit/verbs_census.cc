#include "kit/verbs_census.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <regex>

namespace rmsg::testing {
namespace {

int count_ours(const std::string& json) {
  const std::regex pid_re("\"pid\":" + std::to_string(getpid()) + "[,}]");
  return static_cast<int>(std::distance(std::sregex_iterator(json.begin(), json.end(), pid_re),
                                        std::sregex_iterator()));
}

}  // namespace

int verbs_objects(const char* kind, std::string* why) {
  return verbs_objects_of({kind}, why)[0];
}

// `rdma -b -` runs one command per input line; with -j each prints one JSON array line.
std::vector<int> verbs_objects_of(const std::vector<std::string>& kinds, std::string* why) {
  std::vector<int> counts(kinds.size(), -1);
  std::string cmd = "printf '";
  for (const auto& k : kinds) cmd += "res show " + k + "\\n";
  cmd += "' | rdma -j -b - 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    if (why) *why = "cannot run: " + cmd;
    return counts;
  }
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::vector<std::string> arrays;
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t end = std::min(out.find('\n', at), out.size());
    if (end > at && out[at] == '[') arrays.push_back(out.substr(at, end - at));
    at = end + 1;
  }
  if (pclose(f) != 0 || arrays.size() != kinds.size()) {
    if (why) *why = cmd + ": " + out.substr(0, 300);
    return counts;
  }
  for (std::size_t i = 0; i < kinds.size(); ++i) counts[i] = count_ours(arrays[i]);
  return counts;
}

std::string Census::to_string() const {
  return "qp " + std::to_string(qp) + ", cq " + std::to_string(cq) + ", mr " + std::to_string(mr);
}

Census take_census(std::string* why) {
  const auto c = verbs_objects_of({"qp", "cq", "mr"}, why);
  return Census{c[0], c[1], c[2]};
}

}  // namespace rmsg::testing
