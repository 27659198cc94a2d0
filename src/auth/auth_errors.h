// Why an authentication failed: AuthErrc, category "rmsg.auth". A connection closes with
// one of these (counted msg.errors.<name>), and Messenger::create returns the key-file
// ones. None is retryable: a later connection meets the same keys.
//
// Threading: any thread.
#pragma once

#include <system_error>

namespace rmsg::auth {

// Values are stable: counters and logs name them.
enum class AuthErrc {
  key_file = 1,         // the own key file cannot be read, or is no Ed25519 private key
  key_permissions = 2,  // the own key file is readable or writable by group or others
  keyring = 3,          // the keyring cannot be read, or a line is malformed
  bad_proof = 4,        // a proof frame of the wrong size, or with a node id of 0
  unknown_key = 5,      // the peer's node id is not in the keyring with that public key
  bad_signature = 6,    // the proof's signature does not verify over this connection
  wrong_peer = 7,       // the proof names another node than the one expected
  not_offered = 8,      // the peer does not authenticate, and it must (policy or keyring)
  unexpected = 9,       // an auth frame out of turn, or a hello before the proof
};

const std::error_category& auth_category() noexcept;
inline std::error_code make_error_code(AuthErrc e) noexcept {
  return {static_cast<int>(e), auth_category()};
}
const char* auth_errc_name(int value) noexcept;  // "bad_signature", ...; "unknown"

}  // namespace rmsg::auth

template <>
struct std::is_error_code_enum<rmsg::auth::AuthErrc> : std::true_type {};
