#include "scale_probe.h"

#include <dirent.h>
#include <glob.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace rmsg::perf {
namespace {

std::int64_t read_number(const char* path) {
  std::ifstream in(path);
  std::int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// Sums every `"key":N` in `text`.
std::int64_t sum_key(const std::string& text, const std::string& key) {
  const std::string pat = "\"" + key + "\":";
  std::int64_t sum = -1;
  for (auto p = text.find(pat); p != std::string::npos; p = text.find(pat, p + 1)) {
    sum = (sum < 0 ? 0 : sum) + std::strtoll(text.c_str() + p + pat.size(), nullptr, 10);
  }
  return sum;
}

}  // namespace

std::int64_t vm_pin_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmPin:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return -1;
}

std::int64_t open_fds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  std::int64_t n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the directory's own descriptor
}

std::int64_t rnr_counter_sum() {
  std::int64_t sum = -1;
  for (const char* name : {"rcvd_rnr_err", "send_rnr_err"}) {
    glob_t g{};
    const std::string pattern = std::string("/sys/class/infiniband/*/ports/*/hw_counters/") + name;
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (std::size_t i = 0; i < g.gl_pathc; ++i) {
        const auto v = read_number(g.gl_pathv[i]);
        if (v >= 0) sum = (sum < 0 ? 0 : sum) + v;
      }
    }
    ::globfree(&g);
  }
  return sum;
}

RdmaCensus rdma_census() {
  RdmaCensus c;
  FILE* p = ::popen("rdma -j resource show 2>/dev/null", "r");
  if (p == nullptr) return c;
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  if (::pclose(p) != 0) return c;
  c.qp = sum_key(text, "qp");
  c.cq = sum_key(text, "cq");
  c.mr = sum_key(text, "mr");
  c.pd = sum_key(text, "pd");
  c.cm_id = sum_key(text, "cm_id");
  return c;
}

std::uint64_t raise_nofile(std::uint64_t want) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur >= want) return r.rlim_cur;
  if (r.rlim_max < want) {
    rlimit up{want, want};
    if (::setrlimit(RLIMIT_NOFILE, &up) == 0) return want;  // privileged (the guest's root)
  }
  r.rlim_cur = r.rlim_max < want ? r.rlim_max : want;
  ::setrlimit(RLIMIT_NOFILE, &r);
  ::getrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_cur;
}

}  // namespace rmsg::perf
