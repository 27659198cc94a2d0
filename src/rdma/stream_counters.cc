#include "rdma/stream_counters.h"

#include <infiniband/verbs.h>

#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>

#include "rmsg/rdma.h"

namespace rmsg {
namespace {

// Per device: what closed streams counted, and the streams alive now.
struct Device {
  std::map<std::string, std::uint64_t, std::less<>> retired;
  std::set<const rdma::StreamCounters*> live;
};

struct Devices {
  std::mutex mu;
  std::map<std::string, Device, std::less<>> by_name;
};

Devices& devices() {
  static Devices* d = new Devices;  // never destroyed: streams may outlive statics
  return *d;
}

// The totals of one device: its closed streams' counts plus its live streams' (relaxed
// reads of counters their loop threads are writing). Called with the lock held.
std::map<std::string, std::uint64_t, std::less<>> totals(const Device& dev) {
  auto sum = dev.retired;
  for (const auto* s : dev.live) {
    for (const auto& [name, value] : s->set().snapshot()) sum[name] += value;
  }
  return sum;
}

// "transport retry counter exceeded" -> "transport_retry_counter_exceeded"
std::string counter_name(const char* prefix, const char* text) {
  std::string s = prefix;
  for (const char* p = text; *p != '\0'; ++p) s += (*p == ' ' || *p == '-') ? '_' : *p;
  return s;
}

}  // namespace

std::uint64_t rdma_device_counter(std::string_view device, std::string_view name) {
  auto& d = devices();
  std::lock_guard lock(d.mu);
  auto it = d.by_name.find(device);
  if (it == d.by_name.end()) return 0;
  const auto& dev = it->second;
  auto r = dev.retired.find(name);
  std::uint64_t sum = r == dev.retired.end() ? 0 : r->second;
  for (const auto* s : dev.live) sum += s->set().value(name);
  return sum;
}

void rdma_dump_device_counters(std::ostream& out) {
  auto& d = devices();
  std::lock_guard lock(d.mu);
  for (const auto& [device, dev] : d.by_name) {
    for (const auto& [name, value] : totals(dev)) {
      out << "rdma." << device << '.' << name << ' ' << value << '\n';
    }
  }
}

namespace rdma {

StreamCounters::StreamCounters(const std::string& device) : device_name_(device) {
  auto& d = devices();
  std::lock_guard lock(d.mu);
  auto it = d.by_name.find(device_name_);
  if (it == d.by_name.end()) it = d.by_name.emplace(device_name_, Device{}).first;
  it->second.live.insert(this);
}

StreamCounters::~StreamCounters() {
  auto& d = devices();
  std::lock_guard lock(d.mu);
  auto& dev = d.by_name.find(device_name_)->second;  // the constructor made it
  for (const auto& [name, value] : set_.snapshot()) dev.retired[name] += value;
  dev.live.erase(this);
}

// Both from the stream's loop thread, like every other count.
void StreamCounters::wc_error(int status) {
  if (status == IBV_WC_WR_FLUSH_ERR) return wc_flushed.add();
  if (status == IBV_WC_RNR_RETRY_EXC_ERR) rnr_retry_exceeded.add();
  set_.counter(counter_name("wc_error.", ibv_wc_status_str(static_cast<ibv_wc_status>(status))))
      .add_owned();
}

void StreamCounters::async_event(int type) {
  set_.counter(counter_name("async_event.", ibv_event_type_str(static_cast<ibv_event_type>(type))))
      .add_owned();
}

}  // namespace rdma
}  // namespace rmsg
