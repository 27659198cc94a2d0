#include "rmsg/counters.h"

namespace rmsg {

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

std::map<std::string, std::uint64_t> CounterSet::snapshot() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, c] : by_name_) out.emplace(name, c->value());
  return out;
}

void CounterSet::dump(std::ostream& out, std::string_view prefix) const {
  for (const auto& [name, v] : snapshot()) out << prefix << name << ' ' << v << '\n';
}

CounterSet& CounterSet::global() {
  static CounterSet set;
  return set;
}

}  // namespace rmsg
