// Node ids (rmsg/node_id.h): generated from getrandom(2), written as 16 hex digits.
#include "rmsg/node_id.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <string>

namespace rmsg {
namespace {

std::error_code last_errno() noexcept {
  return errno_code(errno);
}

Result<std::string> read_small_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return last_errno();
  std::string text;
  char buf[64];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const auto e = last_errno();
      ::close(fd);
      return e;
    }
    if (n == 0 || text.size() > 256) break;  // an id is short: the rest is not ours to read
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

Result<void> write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return last_errno();
    done += static_cast<std::size_t>(n);
  }
  return {};
}

// A new id written to a temporary file and linked to `path`; EEXIST when another got there.
Result<NodeId> create_id_file(const std::string& path) {
  auto id = generate_node_id();
  if (!id) return id.error();
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return last_errno();
  auto w = write_all(fd, node_id_to_string(*id) + "\n");
  if (w && ::fsync(fd) != 0) w = last_errno();
  ::close(fd);
  if (w && ::link(tmp.c_str(), path.c_str()) != 0) w = last_errno();
  ::unlink(tmp.c_str());
  if (!w) return w.error();
  return *id;
}

}  // namespace

Result<NodeId> generate_node_id() noexcept {
  for (;;) {
    NodeId id = 0;
    const ssize_t n = ::getrandom(&id, sizeof id, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return last_errno();
    if (static_cast<std::size_t>(n) == sizeof id && id != 0) return id;  // else draw again
  }
}

std::string node_id_to_string(NodeId id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

Result<NodeId> parse_node_id(std::string_view text) noexcept {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
    text.remove_prefix(2);
  if (text.empty() || text.size() > 16) return Errc::invalid_argument;
  NodeId id = 0;
  for (const char c : text) {
    int digit = 0;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return Errc::invalid_argument;
    }
    id = (id << 4) | static_cast<NodeId>(digit);
  }
  if (id == 0) return Errc::invalid_argument;
  return id;
}

Result<NodeId> node_id_file(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto text = read_small_file(path);
    if (text) return parse_node_id(*text);
    if (text.error() != errno_code(ENOENT)) return text.error();
    auto made = create_id_file(path);
    if (made || made.error() != errno_code(EEXIST)) return made;
    // Another process linked its id first: read that one.
  }
  return errno_code(EEXIST);
}

}  // namespace rmsg
