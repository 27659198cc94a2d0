// Ed25519 keys (OpenSSL's libcrypto): a node's own private key, loaded from a PEM file that
// only its owner may read, public keys as 32 raw bytes, signing and verifying. Key files
// are PKCS#8 PEM, what `openssl genpkey -algorithm ed25519` and `rmsg-keys new` write.
//
// Ownership: PrivateKey and Verifier own their EVP_PKEY (move-only). Threading: one object
// per thread at a time; the free functions any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "rmsg/result.h"

struct evp_pkey_st;

namespace rmsg::auth {

inline constexpr std::size_t kPublicKeySize = 32;
inline constexpr std::size_t kSignatureSize = 64;
inline constexpr std::size_t kNonceSize = 32;
using PublicKey = std::array<std::byte, kPublicKeySize>;
using Signature = std::array<std::byte, kSignatureSize>;
using Nonce = std::array<std::byte, kNonceSize>;

namespace detail {
struct PkeyFree {
  void operator()(evp_pkey_st* p) const noexcept;
};
using Pkey = std::unique_ptr<evp_pkey_st, PkeyFree>;
}  // namespace detail

class PrivateKey {
 public:
  // The key in `path`. Errors: AuthErrc::key_permissions when the file's mode lets group
  // or others read or write it (checked on the opened file, before its bytes are read),
  // AuthErrc::key_file when it cannot be read or holds no Ed25519 private key.
  static Result<PrivateKey> load(const std::string& path);
  // A key from PEM text (no permission check: for keys that are not files, e.g. a
  // fuzzer's fixed test keys). AuthErrc::key_file when it holds no Ed25519 private key.
  static Result<PrivateKey> from_pem(std::string_view pem);
  // A new key, written to `path` (created, mode 0600; an existing file is an error).
  static Result<PrivateKey> create(const std::string& path);

  const PublicKey& public_key() const noexcept { return public_; }
  // Ed25519 over `message`; empty on a libcrypto failure (out of memory).
  Result<Signature> sign(std::span<const std::byte> message) const;

 private:
  explicit PrivateKey(detail::Pkey key);
  detail::Pkey key_;
  PublicKey public_{};
};

// One peer's public key, parsed once (the keyring keeps one per entry).
class Verifier {
 public:
  static Result<Verifier> make(const PublicKey& key);
  // Whether `signature` is this key's over `message`.
  bool verify(std::span<const std::byte> message, const Signature& signature) const;
  const PublicKey& key() const noexcept { return raw_; }

 private:
  Verifier(detail::Pkey key, const PublicKey& raw) : key_(std::move(key)), raw_(raw) {}
  detail::Pkey key_;
  PublicKey raw_{};
};

// A fresh nonce from the operating system's generator (RAND_bytes); Errc::resource_exhausted
// when it cannot give one.
Result<Nonce> random_nonce();

// Hex, lower case, and back (64 characters for a public key).
std::string to_hex(std::span<const std::byte> bytes);
bool from_hex(std::string_view hex, std::span<std::byte> out);

}  // namespace rmsg::auth
