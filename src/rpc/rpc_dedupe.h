// The server's bounded de-duplication table for MethodOptions::dedupe methods: (caller
// node, call id) -> the encoded reply, with the session it was made in and its method,
// oldest evicted first once `capacity` is reached.
//
// A caller numbers its calls afresh in each process and in each endpoint, so an id names
// a call only within one incarnation of the caller. The table answers a request only when
// it is a retry (the request's retry flag) of the same method in the same session (the
// server's cookie for the peer's session, which every new session and every reset
// changes): a new call that reuses an old id runs. A reset forgets the peer's entries
// (forget()), and a new call erases the entry its id would otherwise hit (erase()).
//
// Threading: none (the endpoint's loop thread owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

namespace rmsg::rpc {

class DedupeTable {
 public:
  using Key = std::pair<std::uint64_t, std::uint64_t>;  // (node, call id)

  explicit DedupeTable(std::size_t capacity) noexcept : capacity_(capacity) {}

  // The stored reply of a call `key` of `method` in session `session`, or null.
  const std::vector<std::byte>* find(const Key& key, std::uint64_t session,
                                     std::uint32_t method) const {
    auto it = replies_.find(key);
    if (it == replies_.end() || it->second.session != session || it->second.method != method) {
      return nullptr;
    }
    return &it->second.reply;
  }
  void put(const Key& key, std::uint64_t session, std::uint32_t method,
           std::vector<std::byte> reply) {
    if (capacity_ == 0) return;
    const std::uint64_t stamp = ++stamps_;
    replies_.insert_or_assign(key, Entry{session, method, stamp, std::move(reply)});
    order_.emplace_back(key, stamp);
    while (replies_.size() > capacity_) {
      // A slot whose entry was replaced or erased since is stale: dropped alone.
      if (live(order_.front())) replies_.erase(order_.front().first);
      order_.pop_front();
    }
    // Stale slots (erase(), replaced entries) beyond the live ones: compacted.
    if (order_.size() > 2 * capacity_ + 16) {
      std::erase_if(order_, [this](const Slot& s) { return !live(s); });
    }
  }
  void erase(const Key& key) { replies_.erase(key); }
  void forget(std::uint64_t node) {
    auto it = replies_.lower_bound(Key{node, 0});
    while (it != replies_.end() && it->first.first == node) it = replies_.erase(it);
    std::erase_if(order_, [node](const Slot& s) { return s.first.first == node; });
  }
  std::size_t size() const noexcept { return replies_.size(); }

 private:
  struct Entry {
    std::uint64_t session = 0;
    std::uint32_t method = 0;
    std::uint64_t stamp = 0;  // its slot in order_
    std::vector<std::byte> reply;
  };
  using Slot = std::pair<Key, std::uint64_t>;
  bool live(const Slot& s) const {
    auto it = replies_.find(s.first);
    return it != replies_.end() && it->second.stamp == s.second;
  }
  std::size_t capacity_;
  std::uint64_t stamps_ = 0;
  std::map<Key, Entry> replies_;
  std::deque<Slot> order_;  // insertion order, for eviction
};

}  // namespace rmsg::rpc
