// The server's bounded de-duplication table for MethodOptions::dedupe methods: (caller
// node, call id) -> the encoded reply, oldest evicted first once `capacity` is reached.
// A peer that restarted (a session reset with peer_restarted) numbers its calls again
// from 1, so its entries are dropped then (forget()).
//
// Threading: none (the endpoint's loop thread owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

namespace rmsg::msg {

class DedupeTable {
 public:
  using Key = std::pair<std::uint64_t, std::uint64_t>;  // (node, call id)

  explicit DedupeTable(std::size_t capacity) noexcept : capacity_(capacity) {}

  // The stored reply, or null.
  const std::vector<std::byte>* find(const Key& key) const {
    auto it = replies_.find(key);
    return it == replies_.end() ? nullptr : &it->second;
  }
  void put(const Key& key, std::vector<std::byte> reply) {
    if (capacity_ == 0) return;
    auto [it, fresh] = replies_.insert_or_assign(key, std::move(reply));
    if (!fresh) return;
    order_.push_back(key);
    while (replies_.size() > capacity_) {
      replies_.erase(order_.front());
      order_.pop_front();
    }
  }
  void forget(std::uint64_t node) {
    auto it = replies_.lower_bound(Key{node, 0});
    while (it != replies_.end() && it->first.first == node) it = replies_.erase(it);
    std::erase_if(order_, [node](const Key& k) { return k.first == node; });
  }
  std::size_t size() const noexcept { return replies_.size(); }

 private:
  std::size_t capacity_;
  std::map<Key, std::vector<std::byte>> replies_;
  std::deque<Key> order_;  // insertion order, for eviction
};

}  // namespace rmsg::msg
