// rmsg-keys: creates a node's Ed25519 key (mode 0600) and prints its keyring line, shows
// a key file's line, and checks and lists a keyring (docs/security.md, Key management).
// Exit status 0 on success, 1 on a refused file, 2 on a usage error.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "auth/auth_errors.h"
#include "auth/keyring.h"
#include "auth/keys.h"

namespace {

using rmsg::auth::Keyring;
using rmsg::auth::PrivateKey;

constexpr const char* kUsage =
    "usage: rmsg-keys new NODE-ID KEY-FILE\n"
    "       rmsg-keys show NODE-ID KEY-FILE\n"
    "       rmsg-keys list KEYRING\n"
    "\n"
    "Keys of authenticated rmsg messengers (MessengerOptions::auth; docs/security.md).\n"
    "\n"
    "  new   create an Ed25519 private key in KEY-FILE (mode 0600; an existing file is\n"
    "        never overwritten) and print its keyring line: append it to the keyring\n"
    "        that every node reads\n"
    "  show  print the keyring line of the key in KEY-FILE (refused when group or others\n"
    "        may read it, as the messenger refuses it)\n"
    "  list  check KEYRING and print each node id with its keys; a node id with two keys\n"
    "        is in a rotation (both accepted)\n"
    "\n"
    "NODE-ID is decimal or 0x-hex, not 0. A keyring line is \"NODE-ID PUBLIC-KEY\" with the\n"
    "raw public key in 64 hex digits; '#' starts a comment.\n";

bool parse_node(const char* s, std::uint64_t& out) {
  if (s[0] == '-' || s[0] == '+' || s[0] == '\0') return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(s, &end, 0);
  return errno == 0 && *end == '\0' && out != 0;
}

int print_line(std::uint64_t node, const PrivateKey& key) {
  std::printf("%" PRIu64 " %s\n", node, rmsg::auth::to_hex(key.public_key()).c_str());
  return 0;
}

int fail(const char* what, const std::error_code& e) {
  std::fprintf(stderr, "rmsg-keys: %s: %s\n", what, e.message().c_str());
  return 1;
}

int list(const char* path) {
  auto ring = Keyring::load(path);
  if (!ring) return fail(path, ring.error());
  std::map<std::uint64_t, int> keys;
  for (const auto& e : ring.value().entries()) ++keys[e.node];
  for (const auto& e : ring.value().entries()) {
    std::printf("%" PRIu64 " (0x%" PRIx64 ") %s%s\n", e.node, e.node,
                rmsg::auth::to_hex(e.verifier.key()).c_str(),
                keys[e.node] > 1 ? "  (rotation: several keys)" : "");
  }
  std::printf("%zu nodes, %zu keys\n", keys.size(), ring.value().entries().size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view cmd = argc > 1 ? argv[1] : "";
  if (cmd == "--help" || cmd == "-h" || cmd == "--version") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::uint64_t node = 0;
  if ((cmd == "new" || cmd == "show") && argc == 4 && parse_node(argv[2], node)) {
    auto key = cmd == "new" ? PrivateKey::create(argv[3]) : PrivateKey::load(argv[3]);
    if (!key) return fail(argv[3], key.error());
    return print_line(node, key.value());
  }
  if (cmd == "list" && argc == 3) return list(argv[2]);
  std::fputs(kUsage, stderr);
  return 2;
}
