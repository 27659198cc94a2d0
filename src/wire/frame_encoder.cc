// Frame encoding (frame_encoder.h).
#include "wire/frame_encoder.h"

#include <cstring>

#include "wire/crc32c.h"
#include "wire/frame_bytes.h"
#include "wire/frame_errors.h"

namespace rmsg::wire {
namespace {

Result<void> check(FrameType type, std::span<const Segment> segments, const FrameLimits& limits,
                   std::uint8_t flags) noexcept {
  if (segments.size() > kMaxSegments || (flags & ~kKnownFlags) != 0 ||
      !is_known_frame_type(static_cast<std::uint8_t>(type))) {
    return Errc::invalid_argument;
  }
  std::uint64_t total = 0;
  for (const auto& s : segments) {
    if ((s.alignment & (s.alignment - 1)) != 0) return Errc::invalid_argument;  // 0 or 2^k
    total += s.data.size();
  }
  if (total > limits.max_frame_size) return make_error_code(WireErrc::oversize);
  return {};
}

Preamble preamble_of(FrameType type, std::span<const Segment> segments,
                     std::uint8_t flags) noexcept {
  Preamble p;
  p.type = type;
  p.flags = flags;
  p.segment_count = static_cast<std::uint8_t>(segments.size());
  for (std::size_t i = 0; i < segments.size(); ++i) {
    p.lengths[i] = static_cast<std::uint32_t>(segments[i].data.size());
    p.alignments[i] = segments[i].alignment;
  }
  return p;
}

}  // namespace

std::span<const std::span<const std::byte>> EncodedFrame::iov() const noexcept {
  std::size_t n = 0;
  std::size_t skip = written_;
  auto add = [&](std::span<const std::byte> part) {
    if (skip >= part.size()) {
      skip -= part.size();
      return;
    }
    iov_[n++] = part.subspan(skip);
    skip = 0;
  };
  add(preamble_);
  for (std::size_t i = 0; i < segment_count_; ++i) add(segments_[i]);
  add(std::span<const std::byte>(epilogue_.data(), epilogue_size_));
  return {iov_.data(), n};
}

void EncodedFrame::consume(std::size_t n) noexcept {
  written_ = n >= size() ? total_ : written_ + n;
}

std::size_t encoded_frame_size(std::span<const Segment> segments) noexcept {
  std::size_t n = kPreambleSize;
  for (const auto& s : segments) n += s.data.size() + kSegmentCrcSize;
  return n;
}

Result<void> encode_frame(FrameType type, std::span<const Segment> segments,
                          const FrameLimits& limits, EncodedFrame& out,
                          std::uint8_t flags) noexcept {
  RMSG_TRY(check(type, segments, limits, flags));
  encode_preamble(preamble_of(type, segments, flags), out.preamble_);
  out.segment_count_ = segments.size();
  out.epilogue_size_ = segments.size() * kSegmentCrcSize;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    out.segments_[i] = segments[i].data;
    wire::store_le<std::uint32_t>(out.epilogue_.data() + kSegmentCrcSize * i,
                                  crc32c(segments[i].data));
  }
  out.total_ = encoded_frame_size(segments);
  out.written_ = 0;
  return {};
}

Result<std::size_t> encode_frame_to(std::span<std::byte> out, FrameType type,
                                    std::span<const Segment> segments, const FrameLimits& limits,
                                    std::uint8_t flags) noexcept {
  // check()'s tests in its order, in one pass that also builds the preamble and the size
  // (the per-message path: queue_frame encodes every frame through here).
  if (segments.size() > kMaxSegments || (flags & ~kKnownFlags) != 0 ||
      !is_known_frame_type(static_cast<std::uint8_t>(type))) {
    return Errc::invalid_argument;
  }
  Preamble pre;
  pre.type = type;
  pre.flags = flags;
  pre.segment_count = static_cast<std::uint8_t>(segments.size());
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if ((s.alignment & (s.alignment - 1)) != 0) return Errc::invalid_argument;  // 0 or 2^k
    total += s.data.size();
    pre.lengths[i] = static_cast<std::uint32_t>(s.data.size());
    pre.alignments[i] = s.alignment;
  }
  if (total > limits.max_frame_size) return make_error_code(WireErrc::oversize);
  const std::size_t size =
      kPreambleSize + static_cast<std::size_t>(total) + kSegmentCrcSize * segments.size();
  if (out.size() < size) return Errc::resource_exhausted;
  encode_preamble(pre, out.first<kPreambleSize>());
  std::byte* p = out.data() + kPreambleSize;
  std::byte* epilogue = p + total;
  for (const auto& s : segments) {
    if (!s.data.empty()) std::memcpy(p, s.data.data(), s.data.size());
    p += s.data.size();
    wire::store_le<std::uint32_t>(epilogue, crc32c(s.data));
    epilogue += kSegmentCrcSize;
  }
  return size;
}

}  // namespace rmsg::wire
