// The "rmsg.auth" category (auth_errors.h).
#include "auth/auth_errors.h"

#include <array>
#include <string>

#include "base/retry_rules.h"

namespace rmsg::auth {
namespace {

constexpr std::array<const char*, 10> kNames = {
    "unknown",     "key_file",      "key_permissions", "keyring",     "bad_proof",
    "unknown_key", "bad_signature", "wrong_peer",      "not_offered", "unexpected"};

class AuthCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rmsg.auth"; }
  std::string message(int v) const override {
    switch (static_cast<AuthErrc>(v)) {
      case AuthErrc::key_file:
        return "key file unreadable or not an Ed25519 private key";
      case AuthErrc::key_permissions:
        return "key file readable or writable by group or others";
      case AuthErrc::keyring:
        return "keyring unreadable or malformed";
      case AuthErrc::bad_proof:
        return "malformed authentication proof";
      case AuthErrc::unknown_key:
        return "node id and key not in the keyring";
      case AuthErrc::bad_signature:
        return "authentication signature does not verify";
      case AuthErrc::wrong_peer:
        return "authenticated node is not the one expected";
      case AuthErrc::not_offered:
        return "peer does not authenticate";
      case AuthErrc::unexpected:
        return "authentication frame out of turn";
    }
    return "unknown authentication error";
  }
};

}  // namespace

const std::error_category& auth_category() noexcept {
  static const AuthCategory category;
  static const bool rule = register_retryable(category, 0);  // none: same keys next time
  (void)rule;
  return category;
}

const char* auth_errc_name(int value) noexcept {
  return value > 0 && value < static_cast<int>(kNames.size()) ? kNames[value] : "unknown";
}

}  // namespace rmsg::auth
