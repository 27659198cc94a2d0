// The per-process descriptor table: for each descriptor number, which managed socket it
// refers to, whether it is an epoll instance, whether the shim owns it privately, and which
// epoll sets watch it. A preallocated array indexed by the number (sized from
// RLIMIT_NOFILE's hard limit, capped), read and written with atomics only: no locks, no
// allocation once mapped. It is mapped at the first call that enters something (a TCP
// socket, an epoll set, the stats file), not at start-up: a program that never makes one
// (most of what a shell runs) pays nothing for it. Until then, and for descriptors above
// its size, every number passes through untracked.
//
// Why track epoll registrations (docs/socket-shim.md, "Descriptor identity"): epoll keys
// an entry by (open file, number). A later RDMA upgrade replaces the file behind a number
// with dup2(); the old entry would stay alive (the shim still holds the TCP socket) and
// the new file would be in no set. The upgrade must therefore EPOLL_CTL_DEL in each set
// before the dup2 and ADD the same events and data after it, and only epoll_ctl tells it
// which sets those are.
#pragma once

#include <atomic>
#include <cstdint>

#include "posix/socket_object.h"

namespace rmsg::posix {

// One epoll set's registration of a descriptor number.
struct EpollRegistration {
  std::atomic<std::uint32_t> epoll_id{0};  // 0: unused; else the set's EpollId
  std::atomic<std::uint32_t> events{0};
  std::atomic<std::uint64_t> data{0};
};

inline constexpr int kRegistrationsPerFd = 2;

struct FdSlot {
  std::atomic<std::uint32_t> object{0};    // SocketObject index + 1; 0: not managed
  std::atomic<std::uint32_t> epoll_id{0};  // non-zero: this number is that epoll instance
  std::atomic<std::uint32_t> flags{0};     // kFdPrivate, kFdRegistrationsLost
  EpollRegistration registrations[kRegistrationsPerFd];
};

inline constexpr std::uint32_t kFdPrivate = 1;            // the shim's own descriptor
inline constexpr std::uint32_t kFdRegistrationsLost = 2;  // more sets than slots

class FdTable {
 public:
  // Maps the arrays once (mmap, never freed); true when they are there. False when the
  // mapping failed (everything then passes through untracked) or, while another thread
  // maps them, on the mapping thread itself (a signal handler): that call goes untracked.
  // Other threads wait the two mmap()s out.
  bool ensure();
  int size() const { return size_.load(std::memory_order_acquire); }

  FdSlot* slot(int fd) const { return fd >= 0 && fd < size() ? &slots_[fd] : nullptr; }
  // The managed socket behind fd, or null. Inline: every data call asks.
  SocketObject* object(int fd) const {
    if (static_cast<unsigned>(fd) >= static_cast<unsigned>(size())) return nullptr;
    std::uint32_t i = slots_[fd].object.load(std::memory_order_acquire);
    return i == 0 ? nullptr : &objects_[i - 1];
  }
  SocketObject* object_at(std::uint32_t index) const { return &objects_[index]; }
  // The highest number the table has recorded anything for (bounds close_range's walk).
  int max_fd_seen() const { return max_fd_seen_.load(std::memory_order_acquire); }
  void saw(int fd) {
    int m = max_fd_seen_.load(std::memory_order_relaxed);
    while (m < fd && !max_fd_seen_.compare_exchange_weak(m, fd, std::memory_order_acq_rel)) {
    }
  }
  std::uint32_t objects_high_water() const { return high_water_.load(std::memory_order_acquire); }

  // A new socket object (refs 1, owned by `pid`), or null when the table is full.
  SocketObject* allocate(SocketState state, int pid);
  std::uint32_t index_of(const SocketObject* o) const {
    return static_cast<std::uint32_t>(o - objects_);
  }

  // Makes fd refer to o (one more reference). What fd referred to before is returned with
  // its reference dropped by the caller (release()).
  SocketObject* attach(int fd, SocketObject* o);
  // Forgets fd; returns the object it referred to (the caller releases it), or null.
  SocketObject* detach(int fd);
  // One reference less; true when it was the last (the caller reports, then free_object()).
  static bool release(SocketObject* o);
  static void free_object(SocketObject* o);

  // An epoll instance made at number fd; clears what fd had.
  void mark_epoll(int fd, std::uint32_t id);

 private:
  // The number no longer names its epoll set; when it was the set's last number in this
  // process, the set is gone and every registration it held expires (frees its place).
  void forget_epoll_number(FdSlot& s);
  bool map();

  FdSlot* slots_ = nullptr;
  SocketObject* objects_ = nullptr;
  std::atomic<int> size_{0};     // published after the arrays: 0 until they are mapped
  std::atomic<int> mapping_{0};  // 0 not yet, 1 mapping, 2 mapped, 3 failed
  std::atomic<long> mapping_thread_{0};
  std::atomic<std::uint32_t> next_hint_{0};
  std::atomic<std::uint32_t> high_water_{0};
  std::atomic<int> max_fd_seen_{-1};
};

}  // namespace rmsg::posix
