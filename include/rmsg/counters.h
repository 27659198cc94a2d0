// Named counters and histograms that a tool can dump. A Counter is a relaxed atomic, cheap
// enough for the data path. Counters live in a CounterSet (a stream's, a device's, a loop's,
// or the process-wide global one); a tool prints a set with dump().
//
// Thread-safety: add()/value() on a Counter from any thread. CounterSet::counter() and
// histogram() may be called from any thread; the returned reference stays valid for the
// set's lifetime. Single-writer updates (add_owned(), Histogram::record()) are documented
// where they are declared.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>

#include "rmsg/export.h"

namespace rmsg {

class RMSG_EXPORT Counter {
 public:
  void add(std::uint64_t n = 1) noexcept { shared_.fetch_add(n, std::memory_order_relaxed); }
  // add() for the one thread that owns the counter (an event loop's): a relaxed load and
  // store instead of an atomic read-modify-write. Only that thread may call it; add() from
  // any other thread at the same time loses nothing, as the two count in separate cells.
  void add_owned(std::uint64_t n = 1) noexcept {
    owned_.store(owned_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Replaces the count (a gauge; by the owner): an add() racing with it may be lost.
  void set(std::uint64_t n) noexcept {
    owned_.store(n, std::memory_order_relaxed);
    shared_.store(0, std::memory_order_relaxed);
  }
  std::uint64_t value() const noexcept {
    return owned_.load(std::memory_order_relaxed) + shared_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> owned_{0};   // add_owned(): the owner's, single-writer
  std::atomic<std::uint64_t> shared_{0};  // add(): any thread's, read-modify-write
};

// A fixed-bucket histogram of non-negative values (nanoseconds, by convention of the names
// ending in _ns): bucket 0 counts zeros, bucket i (1..kBuckets-1) counts values v with
// 2^(i-1) <= v < 2^i, and the last bucket also counts everything larger (2^46 ns is about
// 20 hours).
//
// Thread-safety: record() from one thread at a time (the owner, e.g. the loop thread);
// any thread may read. Each bucket and sum() is read whole (relaxed atomics), but buckets
// read one after another while the owner records need not add up to one moment's count().
class RMSG_EXPORT Histogram {
 public:
  static constexpr int kBuckets = 48;

  static constexpr int bucket_of(std::uint64_t v) noexcept {
    const int b = std::bit_width(v);
    return b < kBuckets ? b : kBuckets - 1;
  }
  // The exclusive upper bound of bucket i (0 for the last one: unbounded).
  static constexpr std::uint64_t upper_bound(int i) noexcept {
    return i + 1 < kBuckets ? std::uint64_t{1} << i : 0;
  }

  void record(std::uint64_t v) noexcept {
    bump(buckets_[bucket_of(v)], 1);
    bump(sum_, v);
  }
  std::uint64_t bucket(int i) const noexcept { return buckets_[i].load(std::memory_order_relaxed); }
  // The sum over the buckets (see above for a racing owner).
  std::uint64_t count() const noexcept;
  // The sum of the recorded values (wraps after 2^64).
  std::uint64_t sum() const noexcept { return sum_.load(std::memory_order_relaxed); }

 private:
  static void bump(std::atomic<std::uint64_t>& a, std::uint64_t n) noexcept {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
  std::atomic<std::uint64_t> sum_{0};
};

class RMSG_EXPORT CounterSet {
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
  // The histogram with this name, created empty on first use. Histograms and counters
  // have separate name spaces; give them distinct names anyway (dump() mixes them).
  Histogram& histogram(std::string_view name);
  // Null when the histogram does not exist.
  const Histogram* find_histogram(std::string_view name) const;
  // A sorted snapshot of the counters: name -> value (histograms are not in it).
  std::map<std::string, std::uint64_t> snapshot() const;
  // "name value" lines, sorted by name; prefix is prepended to each name. A histogram
  // prints as "name.count N", "name.sum S" and one "name.lt_<upper_bound> N" per
  // non-empty bucket (zeros are "name.lt_1"; the open last bucket is "name.ge_<2^46>").
  void dump(std::ostream& out, std::string_view prefix = {}) const;

  // The process-wide set (connection manager, devices, loops).
  static CounterSet& global();

 private:
  mutable std::mutex mu_;
  std::deque<Counter> storage_;  // deque: references stay valid as it grows
  std::map<std::string, Counter*, std::less<>> by_name_;
  std::deque<Histogram> histogram_storage_;
  std::map<std::string, Histogram*, std::less<>> histograms_;
};

}  // namespace rmsg
