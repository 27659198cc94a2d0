#include <algorithm>
#include <cstdio>
#include <map>

#include "perf.h"
#include "stream_transport.h"

namespace rmsg::perf {
namespace {

// Function-local statics: registrations run during static initialisation, in any order.
std::map<std::string, RunnerFactory>& runners() {
  static std::map<std::string, RunnerFactory> m;
  return m;
}
std::vector<const StreamTransport*>& transports() {
  static std::vector<const StreamTransport*> v;
  return v;
}

}  // namespace

const char* to_string(Test t) {
  return t == Test::lat ? "lat" : "bw";
}

bool register_runner(const char* name, RunnerFactory factory) {
  runners()[name] = factory;
  return true;
}

RunnerFactory find_runner(const std::string& name) {
  auto it = runners().find(name);
  return it == runners().end() ? nullptr : it->second;
}

std::vector<std::string> runner_names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : runners()) out.push_back(name);
  return out;
}

bool register_stream_transport(const StreamTransport* transport) {
  transports().push_back(transport);
  return true;
}

const StreamTransport* find_stream_transport(const std::string& name) {
  auto& v = transports();
  auto it = std::find_if(v.begin(), v.end(), [&](auto* t) { return name == t->name; });
  return it == v.end() ? nullptr : *it;
}

std::vector<const StreamTransport*> stream_transports() {
  return transports();
}

Progress::Progress(std::string label)
    : label_(std::move(label)), start_(std::chrono::steady_clock::now()), last_(start_) {}

void Progress::maybe_print(std::uint64_t done, std::uint64_t total) {
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(2) || now - last_ < std::chrono::seconds(1)) return;
  last_ = now;
  std::fprintf(stderr, "rmsg-perf: %s: %llu/%llu (%.0f%%)\n", label_.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
               total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0);
}

}  // namespace rmsg::perf
