// The RDMA stream's wire format: everything a peer sees. docs/protocol.md is the prose
// specification; the constants below repeat its tables. All multi-byte fields are
// big-endian (network order).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rmsg/result.h"

namespace rmsg::rdma::wire {

// ---- Hello: the private data of connect request, accept reply and reject: a fixed part
// of 32 bytes, then an optional extension block, 56 bytes in all at most.
//  off size field
//   0   4   magic 0x524D5347 ("RMSG")
//   4   1   version (kVersion)
//   5   1   length of the hello in bytes: 32 + the extension block's (32: no block)
//   6   1   kind (HelloKind)
//   7   1   reject reason (RejectReason; 0 unless kind == reject)
//   8   4   recv_block_size: bytes per receive block = largest SEND the sender accepts
//  12   4   recv_block_count: receives posted before the handshake = initial credits
//  16   4   send_block_size   (informational)
//  20   4   send_block_count  (informational)
//  24   4   inline_size granted by the sender's device (informational)
//  28   4   epoch: the sender's connection epoch: structure serial << 16 | generation
//  32   ..  extension block, up to `length`: fields of type u8, len u8, value[len]
//           (ExtType). Unknown types are skipped. A field that runs past `length`, a
//           known field of the wrong size or a known field twice is a malformed hello.
inline constexpr std::uint32_t kMagic = 0x524D5347;
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kHelloSize = 32;  // the fixed part: all a hello without extensions
inline constexpr std::size_t kMaxConnectPrivateData = 56;  // IB CM REQ limit via rdma_cm
inline constexpr std::size_t kMaxHelloSize = kMaxConnectPrivateData;
static_assert(kHelloSize <= kMaxConnectPrivateData);
inline constexpr std::uint32_t kMinRecvBlocks = 4;  // see Credits: threshold >= 2

enum class HelloKind : std::uint8_t { request = 1, accept = 2, reject = 3 };
enum class RejectReason : std::uint8_t {
  none = 0,
  version = 1,    // the request's version is not ours; our version is in the reply
  malformed = 2,  // bad magic, length or field values
  resources = 3,  // the acceptor could not obtain resources
};

// Field types of the extension block. 0 is reserved (never sent; skipped like any type
// this version does not know).
enum class ExtType : std::uint8_t {
  features = 1,  // len 4: u32 feature bits (below); sent only when non-zero
  // len 8: u64 the connector's routing value (ConnectionParams::affinity); sent only in
  // a request and only when non-zero. A listener routes the request on it (another loop
  // may accept it); accept and reject hellos never carry it, a receiver ignores it there.
  affinity = 2,
  // len 4: u32 the most credits the sender of this hello will let its peer hold (its
  // receive window's ceiling, >= recv_block_count); only with kFeatureSharedReceive, which
  // it must come with. Type 3 is reserved (docs/protocol.md).
  recv_window = 4,
};
inline constexpr std::size_t kFeaturesFieldSize = 2 + 4;
inline constexpr std::size_t kAffinityFieldSize = 2 + 8;
inline constexpr std::size_t kRecvWindowFieldSize = 2 + 4;
// Feature bits: a feature is used on a connection only when both hellos set its bit; a
// receiver ignores bits it does not know. kKnownFeatures are those every rmsg stream offers
// (none: a stream offers kFeatureSharedReceive only when RdmaOptions::shared_receive asks),
// so by default no features field, exactly the 32 bytes of a hello without extensions.
inline constexpr std::uint32_t kFeatureSharedReceive = 1u << 0;  // docs/protocol.md
inline constexpr std::uint32_t kKnownFeatures = 0;

struct Hello {
  HelloKind kind = HelloKind::request;
  std::uint8_t version = kVersion;
  RejectReason reason = RejectReason::none;
  std::uint32_t recv_block_size = 0;
  std::uint32_t recv_block_count = 0;
  std::uint32_t send_block_size = 0;
  std::uint32_t send_block_count = 0;
  std::uint32_t inline_size = 0;
  std::uint32_t epoch = 0;
  std::uint32_t features = 0;  // extension field `features`; 0 when absent
  std::uint64_t affinity = 0;  // extension field `affinity` (requests); 0 when absent
  // extension field `recv_window`; 0 when absent (sent when features has
  // kFeatureSharedReceive)
  std::uint32_t recv_window = 0;
};

// An encoded hello: 32 to kMaxHelloSize bytes, a contiguous range (a std::span converts).
class HelloBytes {
 public:
  std::byte* data() noexcept { return bytes_.data(); }
  const std::byte* data() const noexcept { return bytes_.data(); }
  std::size_t size() const noexcept { return size_; }
  std::byte* begin() noexcept { return data(); }
  std::byte* end() noexcept { return data() + size_; }
  const std::byte* begin() const noexcept { return data(); }
  const std::byte* end() const noexcept { return data() + size_; }
  std::byte& operator[](std::size_t i) noexcept { return bytes_[i]; }
  std::byte operator[](std::size_t i) const noexcept { return bytes_[i]; }

 private:
  friend HelloBytes encode_hello(const Hello& hello);
  std::array<std::byte, kMaxHelloSize> bytes_{};
  std::size_t size_ = 0;
};

// 32 bytes, plus the extension block when a field in it has something to say.
HelloBytes encode_hello(const Hello& hello);
// Received private data is zero-padded by the CM, so the hello's own length field says
// where it ends. Errors: Errc::protocol_error (short, bad magic or length, a request or
// accept with recv_block_size 0 or recv_block_count < kMinRecvBlocks, a malformed
// extension block), Errc::version_mismatch (magic right, version not kVersion; `version`
// is still set).
Result<Hello> decode_hello(std::span<const std::byte> data);

// ---- Immediate data (__be32) of every SEND_WITH_IMM.
//  bits 31..24  reserved, 0 (non-zero -> protocol error)
//  bits 23..16  message type (MsgType)
//  bits 15..0   credits returned: receives the sender re-posted since its last message
enum class MsgType : std::uint8_t {
  data = 0,       // 1..peer recv_block_size payload bytes of the stream
  credit = 1,     // no payload: returns credits only
  fin = 2,        // no payload: orderly end of the sender's byte stream
  keepalive = 3,  // no payload: the sender is alive (sent when it has been idle)
  // payload u32 n: the sender drops n credits besides the one it spends (shared-receive
  // mode only; elsewhere a protocol error of the stream's)
  release = 4,
};
inline constexpr std::uint32_t kReleasePayload = 4;
inline constexpr std::uint32_t kMaxCreditsPerMessage = 0xFFFF;

struct Imm {
  MsgType type = MsgType::data;
  std::uint16_t credits = 0;
};
// Host-order values; the caller converts with htonl/ntohl.
constexpr std::uint32_t encode_imm(MsgType type, std::uint16_t credits) noexcept {
  return (static_cast<std::uint32_t>(type) << 16) | credits;
}
inline Result<Imm> decode_imm(std::uint32_t imm) {
  if ((imm >> 24) != 0) return Errc::protocol_error;
  const auto type = (imm >> 16) & 0xFF;
  if (type > static_cast<std::uint32_t>(MsgType::release)) return Errc::protocol_error;
  return Imm{static_cast<MsgType>(type), static_cast<std::uint16_t>(imm & 0xFFFF)};
}

// ---- wr_id of every work request (local only, never on the wire).
//  bits 63..48 generation of the connection structure (stale completions of an earlier
//  use are recognised), bits 47..40 kind, bits 39..0 index (receive block / send-queue
//  slot: SendRing positions are indices, so the index never needs more than its range)
enum class WrKind : std::uint8_t { recv = 1, send = 2 };
constexpr std::uint64_t make_wr_id(std::uint16_t gen, WrKind kind, std::uint64_t index) noexcept {
  return (static_cast<std::uint64_t>(gen) << 48) | (static_cast<std::uint64_t>(kind) << 40) |
         (index & ((std::uint64_t{1} << 40) - 1));
}
constexpr std::uint16_t wr_generation(std::uint64_t wr_id) noexcept {
  return static_cast<std::uint16_t>(wr_id >> 48);
}
constexpr WrKind wr_kind(std::uint64_t wr_id) noexcept {
  return static_cast<WrKind>((wr_id >> 40) & 0xFF);
}
constexpr std::uint64_t wr_index(std::uint64_t wr_id) noexcept {
  return wr_id & ((std::uint64_t{1} << 40) - 1);
}
static_assert(wr_index(make_wr_id(7, WrKind::send, 12345)) == 12345);
static_assert(wr_generation(make_wr_id(7, WrKind::send, 12345)) == 7);

}  // namespace rmsg::rdma::wire
