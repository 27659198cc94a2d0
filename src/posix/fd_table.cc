#include "posix/fd_table.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace rmsg::posix {
namespace {

// A table of 2^20 numbers costs ~112 MiB of address space, touched only where used.
constexpr rlim_t kMaxTableSize = rlim_t{1} << 20;
constexpr rlim_t kMinTableSize = 1024;

void* map_zeroed(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void clear_registrations(FdSlot& s) {
  for (auto& r : s.registrations) r.epoll_id.store(0, std::memory_order_release);
}

}  // namespace

bool FdTable::ensure() {
  int m = mapping_.load(std::memory_order_acquire);
  if (__builtin_expect(m == 2, 1)) return true;
  if (m == 0 && mapping_.compare_exchange_strong(m, 1, std::memory_order_acq_rel)) {
    mapping_thread_.store(syscall(SYS_gettid), std::memory_order_release);
    bool ok = map();
    mapping_.store(ok ? 2 : 3, std::memory_order_release);
    return ok;
  }
  long self = syscall(SYS_gettid);
  while ((m = mapping_.load(std::memory_order_acquire)) == 1) {
    if (mapping_thread_.load(std::memory_order_acquire) == self) return false;
    sched_yield();
  }
  return m == 2;
}

bool FdTable::map() {
  rlimit lim{};
  rlim_t n = kMaxTableSize;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_max != RLIM_INFINITY) n = lim.rlim_max;
  if (n > kMaxTableSize) n = kMaxTableSize;
  if (n < kMinTableSize) n = kMinTableSize;
  // Anonymous mappings are zero-filled, which is every atomic's initial state; placement
  // new is not needed for std::atomic of integral types, whose zero bytes are value zero.
  auto* slots = static_cast<FdSlot*>(map_zeroed(n * sizeof(FdSlot)));
  auto* objects = static_cast<SocketObject*>(map_zeroed(n * sizeof(SocketObject)));
  if (slots == nullptr || objects == nullptr) return false;
  slots_ = slots;
  objects_ = objects;
  size_.store(static_cast<int>(n), std::memory_order_release);
  return true;
}

SocketObject* FdTable::allocate(SocketState state, int pid) {
  const auto n = static_cast<std::uint32_t>(size());
  std::uint32_t start = next_hint_.load(std::memory_order_relaxed);
  for (std::uint32_t k = 0; k < n; ++k) {
    std::uint32_t i = (start + k) % n;
    SocketObject& o = objects_[i];
    SocketState expected = SocketState::free;
    if (!o.state.compare_exchange_strong(expected, state, std::memory_order_acq_rel)) continue;
    o.refs.store(1, std::memory_order_relaxed);
    o.owner_pid.store(pid, std::memory_order_relaxed);
    o.io_fork_epoch.store(0, std::memory_order_relaxed);
    o.bytes_in.store(0, std::memory_order_relaxed);
    o.bytes_out.store(0, std::memory_order_relaxed);
    o.fallback.store(Fallback::not_built, std::memory_order_relaxed);
    o.rdma_bytes_in.store(0, std::memory_order_relaxed);
    o.rdma_bytes_out.store(0, std::memory_order_relaxed);
    o.upgrade_us.store(0, std::memory_order_relaxed);
    o.on_rdma.store(false, std::memory_order_relaxed);
    o.upgrade.store(nullptr, std::memory_order_relaxed);
    o.peer = sockaddr_in6{};
    next_hint_.store(i + 1, std::memory_order_relaxed);
    std::uint32_t hw = high_water_.load(std::memory_order_relaxed);
    while (hw < i + 1 && !high_water_.compare_exchange_weak(hw, i + 1, std::memory_order_acq_rel)) {
    }
    return &o;
  }
  return nullptr;
}

void FdTable::forget_epoll_number(FdSlot& s) {
  std::uint32_t id = s.epoll_id.exchange(0, std::memory_order_acq_rel);
  if (id == 0) return;
  int top = max_fd_seen();
  for (int fd = 0; fd <= top; ++fd) {  // another number of the same set keeps it alive
    if (slots_[fd].epoll_id.load(std::memory_order_acquire) == id) return;
  }
  for (int fd = 0; fd <= top; ++fd) {
    for (auto& r : slots_[fd].registrations) {
      std::uint32_t expected = id;
      r.epoll_id.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
    }
  }
}

SocketObject* FdTable::attach(int fd, SocketObject* o) {
  FdSlot* s = slot(fd);
  if (s == nullptr) return nullptr;
  clear_registrations(*s);
  forget_epoll_number(*s);
  s->flags.store(0, std::memory_order_release);
  if (o != nullptr) saw(fd);
  std::uint32_t before =
      s->object.exchange(o == nullptr ? 0 : index_of(o) + 1, std::memory_order_acq_rel);
  return before == 0 ? nullptr : &objects_[before - 1];
}

SocketObject* FdTable::detach(int fd) {
  FdSlot* s = slot(fd);
  if (s == nullptr) return nullptr;
  clear_registrations(*s);
  forget_epoll_number(*s);
  std::uint32_t before = s->object.exchange(0, std::memory_order_acq_rel);
  return before == 0 ? nullptr : &objects_[before - 1];
}

bool FdTable::release(SocketObject* o) {
  return o->refs.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

void FdTable::free_object(SocketObject* o) {
  o->state.store(SocketState::free, std::memory_order_release);
}

void FdTable::mark_epoll(int fd, std::uint32_t id) {
  FdSlot* s = slot(fd);
  if (s == nullptr) return;
  clear_registrations(*s);
  forget_epoll_number(*s);
  s->flags.store(0, std::memory_order_release);
  s->epoll_id.store(id, std::memory_order_release);
  saw(fd);
}

}  // namespace rmsg::posix
