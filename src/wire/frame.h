// The messenger frame format shared by encoder and decoder (docs/protocol.md, Messenger:
// frames). A frame is a preamble, 0 to 4 segments, and an epilogue:
//
// Preamble, 32 bytes, little-endian:
//  off size field
//   0   1   type (FrameType, frame_types.h)
//   1   1   flags: bit 0 kFlagSecure is reserved for the authenticated/encrypted mode;
//           this version sends 0 and rejects any set bit (bad_flags)
//   2   1   segment count, 0..4
//   3   1   key phase, reserved for the secure mode's rekeying; sent 0, must be 0
//   4  16   4 x u32 segment length (unused slots 0)
//  20   8   4 x u16 segment alignment: 0 or a power of two; the receiver places the segment
//           at an address that is a multiple of it (for later zero-copy placement)
//  28   4   CRC32C of bytes 0..27
// Segments: the segments' bytes back to back, no padding on the wire.
// Epilogue: when the count is not 0, one u32 CRC32C per segment, in order (4 x count bytes).
//
// The receiver checks, in this order, before it trusts or allocates anything: preamble
// CRC, flags and key phase, segment count, type, alignments, the sum of the lengths against
// FrameLimits::max_frame_size. Unused length/alignment slots must be 0 (bad_segment_count).
//
// Secure mode (not implemented; reserved so this preamble stays as is): with kFlagSecure a
// 16-byte AEAD tag over the preamble follows it, and the epilogue carries one 16-byte tag
// per segment instead of the CRCs; key phase names the key in use.
//
// Threading: any thread; pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rmsg/result.h"
#include "wire/frame_types.h"

namespace rmsg::wire {

inline constexpr std::size_t kPreambleSize = 32;
inline constexpr std::size_t kPreambleCrcOffset = 28;
inline constexpr std::size_t kMaxSegments = 4;
inline constexpr std::size_t kSegmentCrcSize = 4;
inline constexpr std::size_t kMaxEpilogueSize = kMaxSegments * kSegmentCrcSize;
inline constexpr std::uint8_t kFlagSecure = 0x01;  // reserved
inline constexpr std::uint8_t kKnownFlags = 0;     // flags this version accepts
inline constexpr std::uint32_t kDefaultMaxFrameSize = 16u << 20;

// Per connection; both sides configure their own (a sender whose frame exceeds the peer's
// limit gets the connection closed with oversize on the peer's side).
struct FrameLimits {
  std::uint32_t max_frame_size = kDefaultMaxFrameSize;  // sum of segment lengths, bytes
};

struct Preamble {
  FrameType type = FrameType::message;
  std::uint8_t flags = 0;
  std::uint8_t segment_count = 0;
  std::uint8_t key_phase = 0;
  std::array<std::uint32_t, kMaxSegments> lengths{};
  std::array<std::uint16_t, kMaxSegments> alignments{};

  // The sum of the lengths (inline: the decoder asks for it per frame).
  std::uint64_t payload_size() const noexcept {
    return std::uint64_t{lengths[0]} + lengths[1] + lengths[2] + lengths[3];
  }
  std::size_t epilogue_size() const noexcept { return segment_count * kSegmentCrcSize; }
};

// Writes the preamble and its CRC; does not validate (the encoder does).
void encode_preamble(const Preamble& p, std::span<std::byte, kPreambleSize> out) noexcept;

// Checks a received preamble in the order above; WireErrc on failure.
Result<Preamble> decode_preamble(std::span<const std::byte, kPreambleSize> in,
                                 const FrameLimits& limits) noexcept;

}  // namespace rmsg::wire
