// The messenger's frame types: the preamble's first byte (docs/protocol.md, Messenger:
// frame types). Modelled on Ceph msgr2's tags. The session layer defines each type's
// payload (src/msg/session*, handshake*); the wire layer only checks that a received type
// is one of these (else WireErrc::unknown_type). Numbers are stable once released: add new
// types at the end and move kLastFrameType.
#pragma once

#include <cstdint>

namespace rmsg::wire {

enum class FrameType : std::uint8_t {
  // 0 is never sent (a zeroed preamble with a valid CRC must not be a frame).
  hello = 1,
  client_ident = 2,
  server_ident = 3,
  ident_missing_features = 4,
  session_reconnect = 5,
  session_reconnect_ok = 6,
  session_retry = 7,
  session_retry_global = 8,
  session_reset = 9,
  wait = 10,
  message = 11,
  ack = 12,
  keepalive = 13,
  keepalive_ack = 14,
  close = 15,
  // The authentication proof (banner feature bit 0; docs/protocol.md, Authentication).
  auth_proof = 16,
  // 17..31 reserved for the authenticated/encrypted mode's later frames.
};

inline constexpr std::uint8_t kFirstFrameType = 1;
inline constexpr std::uint8_t kLastFrameType = 16;

constexpr bool is_known_frame_type(std::uint8_t t) noexcept {
  return t >= kFirstFrameType && t <= kLastFrameType;
}

const char* frame_type_name(FrameType t) noexcept;  // "message", ...; "unknown" otherwise

}  // namespace rmsg::wire
