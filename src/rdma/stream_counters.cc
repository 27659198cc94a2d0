#include "rdma/stream_counters.h"

#include <infiniband/verbs.h>

#include <map>
#include <memory>
#include <mutex>
#include <ostream>

#include "rmsg/rdma.h"

namespace rmsg {
namespace {

struct DeviceSets {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<CounterSet>, std::less<>> sets;
};

DeviceSets& device_sets() {
  static DeviceSets* d = new DeviceSets;  // never destroyed: streams may outlive statics
  return *d;
}

// "transport retry counter exceeded" -> "transport_retry_counter_exceeded"
std::string counter_name(const char* prefix, const char* text) {
  std::string s = prefix;
  for (const char* p = text; *p != '\0'; ++p) s += (*p == ' ' || *p == '-') ? '_' : *p;
  return s;
}

}  // namespace

CounterSet& rdma_device_counters(std::string_view device) {
  auto& d = device_sets();
  std::lock_guard lock(d.mu);
  auto it = d.sets.find(device);
  if (it == d.sets.end()) {
    it = d.sets.emplace(std::string(device), std::make_unique<CounterSet>()).first;
  }
  return *it->second;
}

void rdma_dump_device_counters(std::ostream& out) {
  auto& d = device_sets();
  std::lock_guard lock(d.mu);
  for (const auto& [name, set] : d.sets) set->dump(out, "rdma." + name + ".");
}

namespace rdma {

StreamCounters::StreamCounters(const std::string& device)
    : device_(rdma_device_counters(device)), device_name_(device) {}

StreamCounters::Pair StreamCounters::pair(const char* name) {
  return Pair{set_.counter(name), device_.counter(name)};
}

void StreamCounters::wc_error(int status) {
  if (status == IBV_WC_WR_FLUSH_ERR) return wc_flushed.add();
  if (status == IBV_WC_RNR_RETRY_EXC_ERR) rnr_retry_exceeded.add();
  pair(counter_name("wc_error.", ibv_wc_status_str(static_cast<ibv_wc_status>(status))).c_str())
      .add();
}

void StreamCounters::async_event(int type) {
  pair(counter_name("async_event.", ibv_event_type_str(static_cast<ibv_event_type>(type))).c_str())
      .add();
}

}  // namespace rdma
}  // namespace rmsg
