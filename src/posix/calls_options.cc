// fcntl, ioctl, getsockopt/setsockopt, getsockname/getpeername. On the TCP path the kernel
// answers every one for its own socket (O_NONBLOCK, FD_CLOEXEC, FIONBIO, FIONREAD,
// SO_ERROR after a non-blocking connect, TCP_INFO, SO_DOMAIN/SO_TYPE/SO_PROTOCOL, ...). The
// shim follows fcntl(F_DUPFD*), which makes a new number for the same socket.
#include <fcntl.h>
#include <sys/ioctl.h>

#include <cstdarg>
#include <cstdint>

#include "posix/descriptors.h"
#include "posix/runtime.h"
#include "rmsg/socket.h"

using namespace rmsg::posix;

extern "C" {

int rmsg_fcntl(int fd, int cmd, ...) {
  // fcntl's third argument is an int, a pointer or absent; reading it as a pointer-sized
  // value and passing that on is what the C library's own fcntl does on every Linux ABI.
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  Runtime* rt = runtime();
  int rc = g_real.fcntl(fd, cmd, arg);
  if (rc >= 0 && rt != nullptr && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) &&
      !foreign_process(*rt)) {
    link_duplicate(*rt, fd, rc);
  }
  return rc;
}

int rmsg_ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  runtime();
  return g_real.ioctl(fd, request, arg);
}

int rmsg_getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  runtime();
  return g_real.getsockopt(fd, level, name, value, len);
}

int rmsg_setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  runtime();
  return g_real.setsockopt(fd, level, name, value, len);
}

int rmsg_getsockname(int fd, sockaddr* addr, socklen_t* len) {
  runtime();
  return g_real.getsockname(fd, addr, len);
}

int rmsg_getpeername(int fd, sockaddr* addr, socklen_t* len) {
  runtime();
  return g_real.getpeername(fd, addr, len);
}

}  // extern "C"
