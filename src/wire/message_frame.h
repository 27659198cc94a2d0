// The message frame (docs/protocol.md, Messenger: frames; type message, two segments: the
// 24-byte MessageHeader and the application's payload) encoded in one pass: the per-message
// path of every session writes one per message sent, so it skips the general encoder's
// steps that are fixed for this frame (segment count, alignments, the gather of the
// header into a temporary, the per-segment loop). The bytes are exactly those of
// encode_frame_to(FrameType::message, {encode(header), payload}) (tests/wire:
// MessageFrame.*).
//
// Threading: any thread; pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/frame.h"
#include "wire/session_frames.h"

namespace rmsg::wire {

// Preamble, header, both segment CRCs: the frame's size is this plus the payload's.
inline constexpr std::size_t kMessageFrameOverhead =
    kPreambleSize + MessageHeader::kSize + 2 * kSegmentCrcSize;

// Whether a payload of `n` bytes fits in a frame under `limits` (encode_frame_to's
// oversize check: the sum of the segments against max_frame_size).
inline bool message_frame_fits(std::size_t n, const FrameLimits& limits) noexcept {
  return std::uint64_t{MessageHeader::kSize} + n <= limits.max_frame_size;
}

// Writes the frame to `out`, kMessageFrameOverhead + payload.size() bytes; the payload
// must fit (message_frame_fits).
void encode_message_frame(std::byte* out, const MessageHeader& h,
                          std::span<const std::byte> payload) noexcept;

}  // namespace rmsg::wire
