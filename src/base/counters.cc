#include "rmsg/counters.h"

namespace rmsg {

std::uint64_t Histogram::count() const noexcept {
  std::uint64_t n = 0;
  for (const auto& b : buckets_) n += b.load(std::memory_order_relaxed);
  return n;
}

Counter& CounterSet::counter(std::string_view name) {
  std::lock_guard lock(mu_);
  if (auto it = by_name_.find(name); it != by_name_.end()) return *it->second;
  Counter& c = storage_.emplace_back();
  by_name_.emplace(std::string(name), &c);
  return c;
}

std::uint64_t CounterSet::value(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? 0 : it->second->value();
}

Histogram& CounterSet::histogram(std::string_view name) {
  std::lock_guard lock(mu_);
  if (auto it = histograms_.find(name); it != histograms_.end()) return *it->second;
  Histogram& h = histogram_storage_.emplace_back();
  histograms_.emplace(std::string(name), &h);
  return h;
}

const Histogram* CounterSet::find_histogram(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = histograms_.find(name);
  return it == histograms_.end() ? nullptr : it->second;
}

std::map<std::string, std::uint64_t> CounterSet::snapshot() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, c] : by_name_) out.emplace(name, c->value());
  return out;
}

void CounterSet::dump(std::ostream& out, std::string_view prefix) const {
  auto lines = snapshot();
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, h] : histograms_) {
      lines.emplace(name + ".count", h->count());
      lines.emplace(name + ".sum", h->sum());
      for (int i = 0; i < Histogram::kBuckets; ++i) {
        if (h->bucket(i) == 0) continue;
        const auto bound = Histogram::upper_bound(i);
        const auto label = bound != 0 ? ".lt_" + std::to_string(bound)
                                      : ".ge_" + std::to_string(Histogram::upper_bound(i - 1));
        lines.emplace(name + label, h->bucket(i));
      }
    }
  }
  for (const auto& [name, v] : lines) out << prefix << name << ' ' << v << '\n';
}

CounterSet& CounterSet::global() {
  static CounterSet set;
  return set;
}

}  // namespace rmsg
