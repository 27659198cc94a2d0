// Builds messenger frames (frame.h) for sending: either as a gather list for Stream::writev
// that references the caller's segment bytes (no copy of large segments), or copied into
// one contiguous buffer.
//
// Threading: any thread; an EncodedFrame is used by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rmsg/result.h"
#include "wire/frame.h"

namespace rmsg::wire {

struct Segment {
  std::span<const std::byte> data;
  std::uint16_t alignment = 0;  // 0 or a power of two: where the receiver places it
};

// One frame ready to write: its own preamble and epilogue, and spans over the caller's
// segment bytes, which must stay valid and unchanged until the frame is written (done()).
// Copyable and movable (the gather list is rebuilt on each iov() call).
class EncodedFrame {
 public:
  // The parts not yet written (preamble, non-empty segments, epilogue), for writev.
  // Valid until the next consume() or until this object is moved or destroyed.
  std::span<const std::span<const std::byte>> iov() const noexcept;
  std::size_t size() const noexcept { return total_ - written_; }  // bytes left to write
  std::size_t total_size() const noexcept { return total_; }
  bool done() const noexcept { return written_ == total_; }
  // Marks n more bytes written (what writev returned); n <= size().
  void consume(std::size_t n) noexcept;

 private:
  friend Result<void> encode_frame(FrameType, std::span<const Segment>, const FrameLimits&,
                                   EncodedFrame&, std::uint8_t) noexcept;
  std::array<std::byte, kPreambleSize> preamble_{};
  std::array<std::byte, kMaxEpilogueSize> epilogue_{};
  std::size_t epilogue_size_ = 0;
  std::array<std::span<const std::byte>, kMaxSegments> segments_{};
  std::size_t segment_count_ = 0;
  std::size_t total_ = 0;
  std::size_t written_ = 0;
  mutable std::array<std::span<const std::byte>, kMaxSegments + 2> iov_{};
};

// Fills `out` with a frame of `type` over `segments` (CRCs computed here, one pass over each
// segment). invalid_argument (rmsg::Errc) for more than kMaxSegments segments, a bad
// alignment, unknown flags or type; WireErrc::oversize when the segments exceed
// limits.max_frame_size (the peer would reject the frame). `out` is unchanged on error.
Result<void> encode_frame(FrameType type, std::span<const Segment> segments,
                          const FrameLimits& limits, EncodedFrame& out,
                          std::uint8_t flags = 0) noexcept;

// The frame's size on the wire: preamble + segments + epilogue.
std::size_t encoded_frame_size(std::span<const Segment> segments) noexcept;

// The frame copied into `out` (small control frames; tests). Returns the bytes written;
// resource_exhausted when `out` is shorter than encoded_frame_size(); else as encode_frame.
Result<std::size_t> encode_frame_to(std::span<std::byte> out, FrameType type,
                                    std::span<const Segment> segments, const FrameLimits& limits,
                                    std::uint8_t flags = 0) noexcept;

}  // namespace rmsg::wire
