// Named counters that a tool can dump. A Counter is a relaxed atomic, cheap enough for the
// data path. Counters live in a CounterSet (a stream's, a device's, or the process-wide
// global one); a tool prints a set with dump().
//
// Thread-safety: add()/value() on a Counter from any thread. CounterSet::counter() may be
// called from any thread; the returned reference stays valid for the set's lifetime.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>

namespace rmsg {

class Counter {
 public:
  void add(std::uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
  void set(std::uint64_t n) noexcept { v_.store(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

class CounterSet {
 public:
  CounterSet() = default;
  CounterSet(const CounterSet&) = delete;
  CounterSet& operator=(const CounterSet&) = delete;
  CounterSet(CounterSet&&) = delete;
  CounterSet& operator=(CounterSet&&) = delete;
  ~CounterSet() = default;

  // The counter with this name, created at zero on first use.
  Counter& counter(std::string_view name);
  // 0 when the counter does not exist.
  std::uint64_t value(std::string_view name) const;
  // A sorted snapshot: name -> value.
  std::map<std::string, std::uint64_t> snapshot() const;
  // "name value" lines, sorted by name; prefix is prepended to each name.
  void dump(std::ostream& out, std::string_view prefix = {}) const;

  // The process-wide set (connection manager, devices, loops).
  static CounterSet& global();

 private:
  mutable std::mutex mu_;
  std::deque<Counter> storage_;  // deque: references stay valid as it grows
  std::map<std::string, Counter*, std::less<>> by_name_;
};

}  // namespace rmsg
