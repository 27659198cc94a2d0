// The keyring: which public keys speak for which node id, and the KeyStore, a node's own
// key with its keyring, re-read when either file changes (key rotation without restarts).
//
// Keyring file: one entry a line, "<node id> <public key>", the node id decimal or 0x-hex
// (not 0), the key 64 hex digits (the raw Ed25519 public key); '#' starts a comment, blank
// lines are skipped. A node id may have several keys (rotation: old and new are both
// accepted while both are listed). The operator distributes it; it holds nothing secret.
//
// Threading: one thread at a time (each messenger loop has its own KeyStore).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "auth/keys.h"
#include "rmsg/result.h"

namespace rmsg::auth {

using NodeId = std::uint64_t;

class Keyring {
 public:
  // Errors: AuthErrc::keyring (unreadable, or a malformed line: nothing is taken then).
  static Result<Keyring> parse(std::string_view text);
  static Result<Keyring> load(const std::string& path);

  // The verifier of `key` when it is listed for `node`, else null.
  const Verifier* find(NodeId node, const PublicKey& key) const noexcept;
  // Whether `node` has at least one key here (such a node must authenticate).
  bool lists(NodeId node) const noexcept;
  struct Entry {
    NodeId node;
    Verifier verifier;
  };
  const std::vector<Entry>& entries() const noexcept { return entries_; }

 private:
  std::vector<Entry> entries_;  // sorted by node id
};

// A node's own key and its keyring, from their files.
class KeyStore {
 public:
  // Errors: PrivateKey::load's and Keyring::load's.
  static Result<KeyStore> load(std::string key_path, std::string keyring_path);
  // Re-reads a file whose modification time or size changed since it was read (one stat
  // each). A file that no longer loads leaves the previous keys in use (false, and the
  // error for the log).
  Result<void> refresh();

  const PrivateKey& own() const noexcept { return *own_; }
  const Keyring& keyring() const noexcept { return *ring_; }

 private:
  struct Stamp {
    std::int64_t mtime_ns = 0;
    std::int64_t size = -1;
    bool operator==(const Stamp&) const = default;
  };
  static Stamp stamp_of(const std::string& path);
  std::string key_path_;
  std::string ring_path_;
  Stamp key_stamp_;
  Stamp ring_stamp_;
  std::optional<PrivateKey> own_;
  std::optional<Keyring> ring_;
};

}  // namespace rmsg::auth
