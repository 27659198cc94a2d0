// CallStates' rare paths (rpc_call_states.h): the overflow map and claimed calls, kept out
// of line so that a call's add() and remove() stay a compare-and-swap each.
#include "rpc/rpc_call_states.h"

namespace rmsg::rpc {

void CallStates::add_overflow(CallId id) {
  const std::lock_guard lock(mu_);
  overflow_[id] = false;
  overflow_size_.fetch_add(1, std::memory_order_release);
}

bool CallStates::remove_slow(CallId id, std::uint64_t seen) {
  if (seen == (id | kClaimed)) {
    slot(id).store(0, std::memory_order_release);  // only the loop frees a claimed slot
    return true;
  }
  if (overflow_size_.load(std::memory_order_acquire) == 0) return false;
  const std::lock_guard lock(mu_);
  auto it = overflow_.find(id);
  if (it == overflow_.end()) return false;
  const bool claimed = it->second;
  overflow_.erase(it);
  overflow_size_.fetch_sub(1, std::memory_order_release);
  return claimed;
}

bool CallStates::claim(CallId id) {
  std::uint64_t expect = id;
  if (slot(id).compare_exchange_strong(expect, id | kClaimed, std::memory_order_acq_rel)) {
    return true;
  }
  if (expect == (id | kClaimed) || overflow_size_.load(std::memory_order_acquire) == 0) {
    return false;
  }
  const std::lock_guard lock(mu_);
  auto it = overflow_.find(id);
  if (it == overflow_.end() || it->second) return false;
  it->second = true;
  return true;
}

bool CallStates::claimed(CallId id) {
  if (slot(id).load(std::memory_order_acquire) == (id | kClaimed)) return true;
  if (overflow_size_.load(std::memory_order_acquire) == 0) return false;
  const std::lock_guard lock(mu_);
  auto it = overflow_.find(id);
  return it != overflow_.end() && it->second;
}

}  // namespace rmsg::rpc
