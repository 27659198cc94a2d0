#include "admin/admin_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "rmsg/admin.h"

namespace rmsg::admin {
namespace {

Result<sockaddr_un> address_of(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) return Errc::invalid_argument;
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Someone listens on the socket at `addr` (a live endpoint, not a stale file).
bool answers(const sockaddr_un& addr) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

Result<int> listen_unix(const std::string& path) {
  auto addr = address_of(path);
  if (!addr) return addr.error();
  // Whoever may write the directory may replace the socket with one of their own.
  struct stat dir {};
  if (::stat(directory_of(path).c_str(), &dir) != 0) return errno_code(errno);
  if ((dir.st_mode & (S_IWGRP | S_IWOTH)) != 0) return errno_code(EACCES);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return errno_code(EEXIST);
    if (answers(*addr)) return errno_code(EADDRINUSE);
    if (::unlink(path.c_str()) != 0) return errno_code(errno);
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_code(errno);
  // chmod between bind and listen: nobody can connect to a socket that does not listen
  // yet, so the file is 0600 before anyone could use its wider creation mode.
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0 ||
      ::chmod(path.c_str(), 0600) != 0 || ::listen(fd, 16) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_code(err);
  }
  return fd;
}

}  // namespace rmsg::admin

namespace rmsg {

Result<std::string> admin_request(const std::string& path, std::string_view request,
                                  Duration timeout) {
  auto addr = admin::address_of(path);
  if (!addr) return addr.error();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_code(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0) {
    return errno_code(errno);
  }
  std::string line(request);
  line += '\n';
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string answer;
  std::size_t sent = 0;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Errc::timeout;
    pollfd p{fd, static_cast<short>(sent < line.size() ? POLLOUT : POLLIN), 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_code(errno);
    if (n == 0) return Errc::timeout;
    if (sent < line.size()) {
      const ssize_t w = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (w < 0 && errno != EINTR) return errno_code(errno);
      if (w > 0) sent += static_cast<std::size_t>(w);
      continue;
    }
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno_code(errno);
    if (r == 0) return answer;
    answer.append(buf, static_cast<std::size_t>(r));
  }
}

}  // namespace rmsg
