// Lease: one unit of a shared count of live things (a connection manager's connections,
// cm/connection_limit.h), held by whatever keeps the counted thing alive - a TCP stream, the
// socket lingering after it, an RDMA stream, a socket on its way to another loop - and
// given back when it is destroyed or reset. Move-only: a connection has exactly one, and it
// moves with the connection. A default-constructed lease counts nothing.
//
// The count may go before its leases (a stream kept after its manager went): such a lease
// gives back nothing. Giving back is thread-safe (the count is atomic), so a lease taken
// on one loop may be released on another; LeaseCount::take() is its owner's (one thread
// adds, so a bound checked before it cannot be overtaken). A count made with a notifier
// calls it after each unit comes back, on the releasing thread (for a waiter that must
// know when the count falls: it re-reads live() under its own lock).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

namespace rmsg {

namespace detail {
struct LeaseShared {
  std::atomic<std::size_t> live{0};
  std::function<void()> on_return;  // set before the first lease, then only read
};
}  // namespace detail

class Lease {
 public:
  Lease() noexcept = default;
  Lease(Lease&& other) noexcept : count_(std::move(other.count_)) { other.count_.reset(); }
  Lease& operator=(Lease&& other) noexcept {
    if (this != &other) {
      reset();
      count_ = std::move(other.count_);
      other.count_.reset();
    }
    return *this;
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { reset(); }

  // Gives the unit back now (nothing if it holds none, or its count is gone).
  void reset() noexcept {
    if (auto c = count_.lock()) {
      c->live.fetch_sub(1, std::memory_order_release);
      if (c->on_return) c->on_return();
    }
    count_.reset();
  }

 private:
  friend class LeaseCount;
  explicit Lease(std::weak_ptr<detail::LeaseShared> count) noexcept : count_(std::move(count)) {}
  std::weak_ptr<detail::LeaseShared> count_;
};

// The count leases are taken from. Not copyable: its leases refer to it.
class LeaseCount {
 public:
  LeaseCount() = default;
  explicit LeaseCount(std::function<void()> on_return) { live_->on_return = std::move(on_return); }
  LeaseCount(const LeaseCount&) = delete;
  LeaseCount& operator=(const LeaseCount&) = delete;
  LeaseCount(LeaseCount&&) = delete;
  LeaseCount& operator=(LeaseCount&&) = delete;
  ~LeaseCount() = default;

  // One unit more, held by the lease returned. The owner's thread only.
  Lease take() {
    live_->live.fetch_add(1, std::memory_order_relaxed);
    return Lease(live_);
  }
  // Units held now (any thread).
  std::size_t live() const noexcept { return live_->live.load(std::memory_order_acquire); }

 private:
  std::shared_ptr<detail::LeaseShared> live_ = std::make_shared<detail::LeaseShared>();
};

}  // namespace rmsg
