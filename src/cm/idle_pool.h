// IdlePool: idle connection structures kept for reuse, keyed by their reuse key, bounded
// in count and in idle time. Taking by key returns the most recently idled match (its
// memory is the most likely to be warm); eviction removes the oldest idle structure.
//
// Plain logic, no I/O: the owner destroys what put()/expire() hand back. Loop-thread-only
// like everything the connection manager owns.
#pragma once

#include <cstddef>
#include <list>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rmsg/event_loop.h"

namespace rmsg::cm {

template <class Key, class T, class Hash = std::hash<Key>>
class IdlePool {
 public:
  IdlePool(std::size_t max_size, Duration max_idle) : max_size_(max_size), max_idle_(max_idle) {}

  // Parks `value` under `key`. Returns what had to go to stay within max_size (the oldest
  // idle structures; `value` itself when max_size is 0).
  std::vector<T> put(const Key& key, T value, Clock::time_point now) {
    std::vector<T> evicted;
    if (max_size_ == 0) {
      evicted.push_back(std::move(value));
      return evicted;
    }
    while (lru_.size() >= max_size_) evicted.push_back(pop_oldest());
    lru_.push_front(Entry{key, std::move(value), now});
    by_key_[key].push_back(lru_.begin());
    return evicted;
  }

  // The most recently parked structure under `key`, if any.
  std::optional<T> take(const Key& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return std::nullopt;
    auto entry = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) by_key_.erase(it);
    T value = std::move(entry->value);
    lru_.erase(entry);
    return value;
  }

  // Removes and returns every structure idle for longer than max_idle.
  std::vector<T> expire(Clock::time_point now) {
    std::vector<T> out;
    while (!lru_.empty() && now - lru_.back().since > max_idle_) out.push_back(pop_oldest());
    return out;
  }

  // Removes and returns every structure for which `pred(value)` holds (those of a removed
  // device), oldest first.
  template <class Pred>
  std::vector<T> take_if(Pred pred) {
    std::vector<T> out;
    for (auto it = lru_.end(); it != lru_.begin();) {
      --it;
      if (!pred(static_cast<const T&>(it->value))) continue;
      auto& stack = by_key_[it->key];
      std::erase(stack, it);
      if (stack.empty()) by_key_.erase(it->key);
      out.push_back(std::move(it->value));
      it = lru_.erase(it);
    }
    return out;
  }

  // Removes everything (shutdown).
  std::vector<T> clear() {
    std::vector<T> out;
    while (!lru_.empty()) out.push_back(pop_oldest());
    return out;
  }

  std::size_t size() const noexcept { return lru_.size(); }
  std::size_t count(const Key& key) const {
    auto it = by_key_.find(key);
    return it == by_key_.end() ? 0 : it->second.size();
  }

 private:
  struct Entry {
    Key key;
    T value;
    Clock::time_point since;
  };
  using List = std::list<Entry>;

  T pop_oldest() {
    auto last = std::prev(lru_.end());
    auto& stack = by_key_[last->key];
    // The oldest entry of the pool is the oldest of its key: the front of its stack.
    stack.erase(stack.begin());
    if (stack.empty()) by_key_.erase(last->key);
    T value = std::move(last->value);
    lru_.erase(last);
    return value;
  }

  std::size_t max_size_;
  Duration max_idle_;
  List lru_;  // front = most recently parked
  std::unordered_map<Key, std::vector<typename List::iterator>, Hash> by_key_;
};

}  // namespace rmsg::cm
