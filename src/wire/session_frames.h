// The payloads of the messenger's handshake and session frames (docs/protocol.md,
// Messenger: handshake and session frames, lists every byte). Each frame has one segment
// holding one fixed little-endian layout below (a message frame has two: this header and
// the application's payload). Encoding writes exactly the layout; decoding checks the
// length first: a payload shorter than its layout is Errc::protocol_error, a longer one is
// accepted and its tail ignored (a later version may append fields), reserved fields are
// ignored. Nothing is allocated from a received value.
//
// Threading: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rmsg/result.h"
#include "wire/frame_bytes.h"
#include "wire/seq.h"

namespace rmsg::wire {

using NodeId = std::uint64_t;
using Cookie = std::uint64_t;  // 0: unknown / none

// Hello flags (Hello::flags, Welcome::flags).
inline constexpr std::uint32_t kFlagLossy = 1u << 0;

// client_ident (server_cookie == 0: the sender does not know the peer's session) and
// session_reconnect (it does): one layout, 64 bytes.
struct Hello {
  NodeId node = 0;                // the sender's node id
  NodeId target = 0;              // the node id the sender expects to reach (0: any)
  Cookie client_cookie = 0;       // the sender's session cookie
  Cookie server_cookie = 0;       // the cookie it knows for the receiver's session (0: none)
  std::uint64_t global_seq = 0;   // the sender's connection-attempt counter
  std::uint64_t connect_seq = 0;  // the connection number the sender asks for
  Seq msg_seq = 0;                // the last message the sender delivered (its in_seq)
  std::uint32_t flags = 0;
  static constexpr std::size_t kSize = 64;
};

// server_ident and session_reconnect_ok: the acceptor's answer, 40 bytes.
struct Welcome {
  NodeId node = 0;
  Cookie cookie = 0;  // the acceptor's session cookie
  std::uint64_t connect_seq = 0;
  Seq msg_seq = 0;  // the last message the acceptor delivered
  std::uint32_t flags = 0;
  static constexpr std::size_t kSize = 40;
};

// session_retry (connect_seq), session_retry_global (global_seq), wait (the acceptor's
// own attempt's connect_seq), ack (the last message delivered): one u64, 8 bytes.
struct Value64 {
  std::uint64_t value = 0;
  static constexpr std::size_t kSize = 8;
};

// Why a session_reset or close frame was sent (u32, stable numbers).
enum class CloseReason : std::uint32_t {
  none = 0,
  unknown_session = 1,  // session_reset: the acceptor has no session with these cookies
  wrong_node = 2,       // close: Hello::target is not the acceptor's node id
  protocol = 3,         // close: the peer broke the protocol
  shutdown = 4,         // close: the messenger is shutting down
  lossy_fault = 5,      // session_reset: a lossy session does not resume
  // close: the hello claims its node restarted, but that node's session has a connection
  // that answers keepalives (another holder of the node id, or an impostor)
  duplicate_node = 6,
};

// session_reset and close: u32 reason, u32 reserved; 8 bytes.
struct Reason {
  CloseReason reason = CloseReason::none;
  static constexpr std::size_t kSize = 8;
};

// The first segment of a message frame: seq, ack (piggybacked in_seq), u32 flags,
// u16 service (the user of the session it is for; 0 the default), u16 reserved; 24 bytes.
// The second segment is the application's payload.
struct MessageHeader {
  Seq seq = 0;
  Seq ack = 0;
  std::uint32_t flags = 0;
  std::uint16_t service = 0;
  static constexpr std::size_t kSize = 24;
};

template <class T>
using Encoded = std::array<std::byte, T::kSize>;

Encoded<Hello> encode(const Hello& h) noexcept;
Encoded<Welcome> encode(const Welcome& w) noexcept;
Encoded<Value64> encode(const Value64& v) noexcept;
Encoded<Reason> encode(const Reason& r) noexcept;
Encoded<MessageHeader> encode(const MessageHeader& m) noexcept;

Result<Hello> decode_hello(std::span<const std::byte> b) noexcept;
Result<Welcome> decode_welcome(std::span<const std::byte> b) noexcept;
Result<Value64> decode_value64(std::span<const std::byte> b) noexcept;
Result<Reason> decode_reason(std::span<const std::byte> b) noexcept;
// Inline: every message frame received decodes one.
inline Result<MessageHeader> decode_message_header(std::span<const std::byte> b) noexcept {
  if (b.size() < MessageHeader::kSize) return make_error_code(Errc::protocol_error);
  const std::byte* p = b.data();
  return MessageHeader{wire::load_le<std::uint64_t>(p), wire::load_le<std::uint64_t>(p + 8),
                       wire::load_le<std::uint32_t>(p + 16),
                       wire::load_le<std::uint16_t>(p + 20)};  // bytes 22..23 ignored
}

}  // namespace rmsg::wire
