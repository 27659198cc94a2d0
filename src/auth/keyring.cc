// Keyring parsing and the KeyStore's reloads (keyring.h).
#include "auth/keyring.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "auth/auth_errors.h"

namespace rmsg::auth {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool parse_node(std::string_view s, NodeId& out) {
  if (s.empty() || s.front() == '-' || s.front() == '+') return false;
  const std::string text(s);
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
  if (errno != 0 || end != text.c_str() + text.size() || v == 0) return false;
  out = v;
  return true;
}

}  // namespace

Result<Keyring> Keyring::parse(std::string_view text) {
  Keyring ring;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = trim(line);
    if (line.empty()) continue;
    const std::size_t gap = line.find_first_of(" \t");
    if (gap == std::string_view::npos) return make_error_code(AuthErrc::keyring);
    NodeId node = 0;
    PublicKey key{};
    if (!parse_node(line.substr(0, gap), node) || !from_hex(trim(line.substr(gap)), key)) {
      return make_error_code(AuthErrc::keyring);
    }
    auto v = Verifier::make(key);
    if (!v) return v.error();
    ring.entries_.push_back(Entry{node, std::move(v).value()});
  }
  std::stable_sort(ring.entries_.begin(), ring.entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.node < b.node; });
  return ring;
}

Result<Keyring> Keyring::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error_code(AuthErrc::keyring);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error_code(AuthErrc::keyring);
  return parse(text.str());
}

const Verifier* Keyring::find(NodeId node, const PublicKey& key) const noexcept {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), node,
                             [](const Entry& e, NodeId n) { return e.node < n; });
  for (; it != entries_.end() && it->node == node; ++it) {
    if (it->verifier.key() == key) return &it->verifier;
  }
  return nullptr;
}

bool Keyring::lists(NodeId node) const noexcept {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), node,
                             [](const Entry& e, NodeId n) { return e.node < n; });
  return it != entries_.end() && it->node == node;
}

KeyStore::Stamp KeyStore::stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<std::int64_t>(st.st_size)};
}

Result<KeyStore> KeyStore::load(std::string key_path, std::string keyring_path) {
  KeyStore s;
  s.key_path_ = std::move(key_path);
  s.ring_path_ = std::move(keyring_path);
  s.key_stamp_ = stamp_of(s.key_path_);
  s.ring_stamp_ = stamp_of(s.ring_path_);
  auto own = PrivateKey::load(s.key_path_);
  if (!own) return own.error();
  auto ring = Keyring::load(s.ring_path_);
  if (!ring) return ring.error();
  s.own_.emplace(std::move(own).value());
  s.ring_.emplace(std::move(ring).value());
  return s;
}

Result<void> KeyStore::refresh() {
  if (const Stamp k = stamp_of(key_path_); !(k == key_stamp_)) {
    auto own = PrivateKey::load(key_path_);
    if (!own) return own.error();
    own_.emplace(std::move(own).value());
    key_stamp_ = k;
  }
  if (const Stamp r = stamp_of(ring_path_); !(r == ring_stamp_)) {
    auto ring = Keyring::load(ring_path_);
    if (!ring) return ring.error();
    ring_.emplace(std::move(ring).value());
    ring_stamp_ = r;
  }
  return {};
}

}  // namespace rmsg::auth
