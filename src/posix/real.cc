#include "posix/real.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <type_traits>

namespace rmsg::posix {
namespace {

// What a call does before resolution: the system call itself. Only a call that re-enters
// the shim while phase one runs on the starting thread (a preloaded malloc that reads a
// file from inside dlsym, say) ever gets here; each answers as the kernel does.
namespace raw {

long sc(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  return syscall(n, a, b, c, d, e, f);
}
template <typename T>
long l(T v) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<long>(v);
  } else {
    return static_cast<long>(v);
  }
}

int socket(int d, int t, int p) {
  return static_cast<int>(sc(SYS_socket, d, t, p));
}
int bind(int fd, const sockaddr* a, socklen_t n) {
  return static_cast<int>(sc(SYS_bind, fd, l(a), n));
}
int listen(int fd, int b) {
  return static_cast<int>(sc(SYS_listen, fd, b));
}
int accept4(int fd, sockaddr* a, socklen_t* n, int f) {
  return static_cast<int>(sc(SYS_accept4, fd, l(a), l(n), f));
}
int accept(int fd, sockaddr* a, socklen_t* n) {
  return raw::accept4(fd, a, n, 0);
}
int connect(int fd, const sockaddr* a, socklen_t n) {
  return static_cast<int>(sc(SYS_connect, fd, l(a), n));
}
int shutdown(int fd, int how) {
  return static_cast<int>(sc(SYS_shutdown, fd, how));
}
int close(int fd) {
  return static_cast<int>(sc(SYS_close, fd));
}
int close_range(unsigned a, unsigned b, int f) {
  return static_cast<int>(sc(SYS_close_range, a, b, f));
}
int dup(int fd) {
  return static_cast<int>(sc(SYS_dup, fd));
}
int dup3(int fd, int n, int f) {
  return static_cast<int>(sc(SYS_dup3, fd, n, f));
}
int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return static_cast<int>(sc(SYS_fcntl, fd, cmd, l(arg)));
}
int dup2(int fd, int n) {
  if (fd == n) return raw::fcntl(fd, F_GETFD) < 0 ? -1 : n;  // dup3 refuses equal numbers
  return raw::dup3(fd, n, 0);
}
ssize_t read(int fd, void* b, size_t n) {
  return sc(SYS_read, fd, l(b), l(n));
}
ssize_t readv(int fd, const iovec* v, int n) {
  return sc(SYS_readv, fd, l(v), n);
}
ssize_t recvfrom(int fd, void* b, size_t n, int f, sockaddr* a, socklen_t* al) {
  return sc(SYS_recvfrom, fd, l(b), l(n), f, l(a), l(al));
}
ssize_t recv(int fd, void* b, size_t n, int f) {
  return raw::recvfrom(fd, b, n, f, nullptr, nullptr);
}
ssize_t recvmsg(int fd, msghdr* m, int f) {
  return sc(SYS_recvmsg, fd, l(m), f);
}
ssize_t write(int fd, const void* b, size_t n) {
  return sc(SYS_write, fd, l(b), l(n));
}
ssize_t writev(int fd, const iovec* v, int n) {
  return sc(SYS_writev, fd, l(v), n);
}
ssize_t sendto(int fd, const void* b, size_t n, int f, const sockaddr* a, socklen_t al) {
  return sc(SYS_sendto, fd, l(b), l(n), f, l(a), al);
}
ssize_t send(int fd, const void* b, size_t n, int f) {
  return raw::sendto(fd, b, n, f, nullptr, 0);
}
ssize_t sendmsg(int fd, const msghdr* m, int f) {
  return sc(SYS_sendmsg, fd, l(m), f);
}
ssize_t sendfile(int o, int i, off_t* off, size_t n) {
  return sc(SYS_sendfile, o, i, l(off), l(n));
}
ssize_t splice(int i, loff_t* io, int o, loff_t* oo, size_t n, unsigned f) {
  return sc(SYS_splice, i, l(io), o, l(oo), l(n), f);
}
int ioctl(int fd, unsigned long req, ...) {
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return static_cast<int>(sc(SYS_ioctl, fd, l(req), l(arg)));
}
int getsockopt(int fd, int lv, int nm, void* v, socklen_t* n) {
  return static_cast<int>(sc(SYS_getsockopt, fd, lv, nm, l(v), l(n)));
}
int setsockopt(int fd, int lv, int nm, const void* v, socklen_t n) {
  return static_cast<int>(sc(SYS_setsockopt, fd, lv, nm, l(v), n));
}
int getsockname(int fd, sockaddr* a, socklen_t* n) {
  return static_cast<int>(sc(SYS_getsockname, fd, l(a), l(n)));
}
int getpeername(int fd, sockaddr* a, socklen_t* n) {
  return static_cast<int>(sc(SYS_getpeername, fd, l(a), l(n)));
}
int ppoll(pollfd* f, nfds_t n, const timespec* t, const sigset_t* m) {
  return static_cast<int>(sc(SYS_ppoll, l(f), l(n), l(t), l(m), 8));
}
int poll(pollfd* f, nfds_t n, int ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  return raw::ppoll(f, n, ms < 0 ? nullptr : &t, nullptr);
}
int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const timespec* t, const sigset_t* m) {
  struct {
    const sigset_t* set;
    long size;
  } mask{m, 8};
  timespec copy{};  // the kernel updates the timeout; pselect's is const
  if (t != nullptr) copy = *t;
  return static_cast<int>(
      sc(SYS_pselect6, n, l(r), l(w), l(e), t == nullptr ? 0 : l(&copy), l(&mask)));
}
int select(int n, fd_set* r, fd_set* w, fd_set* e, timeval* t) {
  timespec ts{};
  if (t != nullptr) ts = {t->tv_sec, t->tv_usec * 1000};
  return raw::pselect(n, r, w, e, t == nullptr ? nullptr : &ts, nullptr);
}
int epoll_create1(int f) {
  return static_cast<int>(sc(SYS_epoll_create1, f));
}
int epoll_create(int size) {
  return size <= 0 ? static_cast<int>(sc(SYS_epoll_create1, -1)) : raw::epoll_create1(0);
}
int epoll_ctl(int ep, int op, int fd, epoll_event* e) {
  return static_cast<int>(sc(SYS_epoll_ctl, ep, op, fd, l(e)));
}
int epoll_pwait(int ep, epoll_event* e, int n, int ms, const sigset_t* m) {
  return static_cast<int>(sc(SYS_epoll_pwait, ep, l(e), n, ms, l(m), 8));
}
int epoll_wait(int ep, epoll_event* e, int n, int ms) {
  return raw::epoll_pwait(ep, e, n, ms, nullptr);
}

}  // namespace raw

// The raw system calls, for a call made while this thread is inside dlsym() (a preloaded
// malloc that reads a file, say): dlsym must not recurse into itself.
constexpr RealCalls kRaw = {
#define RMSG_POSIX_REAL_RAW(name, ret, params) .name = raw::name,
    RMSG_POSIX_REAL_CALLS(RMSG_POSIX_REAL_RAW)
#undef RMSG_POSIX_REAL_RAW
};

thread_local bool t_resolving __attribute__((tls_model("initial-exec"))) = false;

// The C library's `name`, found once and kept in g_real (every thread that races here
// stores the same pointer); a name it lacks (close_range before glibc 2.34) keeps the
// system call.
template <auto Member>
auto resolve(const char* name) {
  auto raw_fn = kRaw.*Member;
  if (t_resolving) return raw_fn;
  t_resolving = true;
  void* found = dlsym(RTLD_NEXT, name);
  t_resolving = false;
  // dlsym returns void*; the cast to a function pointer is what POSIX prescribes for it.
  auto fn = found != nullptr ? reinterpret_cast<decltype(raw_fn)>(found) : raw_fn;
  __atomic_store_n(&(g_real.*Member), fn, __ATOMIC_RELEASE);
  return fn;
}

// What each pointer holds until its first call: resolve it, then make the call.
template <typename Fn>
struct Lazy;
template <typename R, typename... A>
struct Lazy<R (*)(A...)> {
  template <auto Member, const char* Name>
  static R call(A... args) {
    return resolve<Member>(Name)(args...);
  }
};

#define RMSG_POSIX_REAL_NAME(name, ret, params) constexpr char name_##name[] = #name;
RMSG_POSIX_REAL_CALLS(RMSG_POSIX_REAL_NAME)
#undef RMSG_POSIX_REAL_NAME

// fcntl and ioctl take C varargs, which a template cannot forward: one pointer-sized
// argument, as the C library's own wrappers read it.
template <typename Second>
struct Lazy<int (*)(int, Second, ...)> {
  template <auto Member, const char* Name>
  static int call(int fd, Second cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    return resolve<Member>(Name)(fd, cmd, arg);
  }
};

constexpr RealCalls kLazy = {
#define RMSG_POSIX_REAL_LAZY(name, ret, params) \
  .name = &Lazy<ret(*) params>::template call<&RealCalls::name, name_##name>,
    RMSG_POSIX_REAL_CALLS(RMSG_POSIX_REAL_LAZY)
#undef RMSG_POSIX_REAL_LAZY
};

}  // namespace

constinit RealCalls g_real = kLazy;

void resolve_real_calls() {
#define RMSG_POSIX_REAL_ALL(name, ret, params) \
  if (g_real.name == kLazy.name) resolve<&RealCalls::name>(name_##name);
  RMSG_POSIX_REAL_CALLS(RMSG_POSIX_REAL_ALL)
#undef RMSG_POSIX_REAL_ALL
}

}  // namespace rmsg::posix
