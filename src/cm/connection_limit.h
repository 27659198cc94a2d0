// ConnectionLimit: the manager's bound on live connections
// (ConnectionManagerOptions::max_connections). Every connection the manager makes or
// accepts holds a lease from the moment it is asked for (connect()) or arrives (the
// RDMA CONNECT_REQUEST, the TCP accept) until it is really released: the stream is
// destroyed, or, for a lingering one, its linger ended. The transports keep the lease
// with whatever outlives the handle (RdmaStream's hooks, the TCP linger service), so the
// count includes lingering connections and no lease depends on the caller's handle.
//
// Plain logic, no I/O. A lease may outlive the limit (a stream kept after its manager
// went): it then counts nothing. try_take() is loop-thread-only, like the manager; a lease
// may be released on any thread (a messenger over several loops moves accepted TCP
// sockets, with their leases, to the loop that owns their peer), so the count is atomic.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

namespace rmsg::cm {

class ConnectionLimit {
 public:
  using Lease = std::shared_ptr<void>;

  // `max` 0: no bound (leases are still handed out and counted).
  explicit ConnectionLimit(std::size_t max) : max_(max) {}

  // A lease, or null when `max` leases are held already.
  Lease try_take() {
    // Only this thread adds, so the check cannot be overtaken (releases only lower it).
    if (max_ != 0 && state_->live.load(std::memory_order_acquire) >= max_) return nullptr;
    state_->live.fetch_add(1, std::memory_order_relaxed);
    return std::make_shared<Token>(state_);
  }

  std::size_t live() const noexcept { return state_->live.load(std::memory_order_acquire); }
  std::size_t max() const noexcept { return max_; }

 private:
  struct State {
    std::atomic<std::size_t> live{0};
  };
  struct Token {
    explicit Token(const std::shared_ptr<State>& s) : state(s) {}
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;
    Token(Token&&) = delete;
    Token& operator=(Token&&) = delete;
    ~Token() {
      if (auto s = state.lock()) s->live.fetch_sub(1, std::memory_order_release);
    }
    std::weak_ptr<State> state;
  };

  std::size_t max_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace rmsg::cm
