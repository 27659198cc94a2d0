// Preamble encoding and validation (frame.h).
#include "wire/frame.h"

#include "wire/crc32c.h"
#include "wire/frame_bytes.h"
#include "wire/frame_errors.h"

namespace rmsg::wire {
namespace {

constexpr std::size_t kLengthsOffset = 4;
constexpr std::size_t kAlignmentsOffset = 20;

bool valid_alignment(std::uint16_t a) noexcept {
  return (a & (a - 1)) == 0;  // 0 or a power of two (no popcount call)
}

}  // namespace

void encode_preamble(const Preamble& p, std::span<std::byte, kPreambleSize> out) noexcept {
  out[0] = static_cast<std::byte>(p.type);
  out[1] = static_cast<std::byte>(p.flags);
  out[2] = static_cast<std::byte>(p.segment_count);
  out[3] = static_cast<std::byte>(p.key_phase);
  for (std::size_t i = 0; i < kMaxSegments; ++i) {
    wire::store_le<std::uint32_t>(out.data() + kLengthsOffset + 4 * i, p.lengths[i]);
    wire::store_le<std::uint16_t>(out.data() + kAlignmentsOffset + 2 * i, p.alignments[i]);
  }
  const auto crc = crc32c(out.first<kPreambleCrcOffset>());
  wire::store_le<std::uint32_t>(out.data() + kPreambleCrcOffset, crc);
}

Result<Preamble> decode_preamble(std::span<const std::byte, kPreambleSize> in,
                                 const FrameLimits& limits) noexcept {
  const auto crc = wire::load_le<std::uint32_t>(in.data() + kPreambleCrcOffset);
  if (crc32c(in.first<kPreambleCrcOffset>()) != crc) {
    return make_error_code(WireErrc::preamble_crc);
  }
  Preamble p;
  const auto type = static_cast<std::uint8_t>(in[0]);
  p.flags = static_cast<std::uint8_t>(in[1]);
  p.segment_count = static_cast<std::uint8_t>(in[2]);
  p.key_phase = static_cast<std::uint8_t>(in[3]);
  if ((p.flags & ~kKnownFlags) != 0 || p.key_phase != 0) {
    return make_error_code(WireErrc::bad_flags);
  }
  if (p.segment_count > kMaxSegments) return make_error_code(WireErrc::bad_segment_count);
  if (!is_known_frame_type(type)) return make_error_code(WireErrc::unknown_type);
  p.type = static_cast<FrameType>(type);
  for (std::size_t i = 0; i < kMaxSegments; ++i) {
    p.lengths[i] = wire::load_le<std::uint32_t>(in.data() + kLengthsOffset + 4 * i);
    p.alignments[i] = wire::load_le<std::uint16_t>(in.data() + kAlignmentsOffset + 2 * i);
  }
  // The usual preamble asks for no alignment and leaves the slots past its count 0: both
  // checks below pass for it, so they run (slot by slot, for the first error in slot
  // order) only when an alignment is set or a slot past the count is not 0.
  const std::uint64_t aligns = wire::load_le<std::uint64_t>(in.data() + kAlignmentsOffset);
  bool unused_zero = true;
  for (std::size_t i = p.segment_count; i < kMaxSegments; ++i) unused_zero &= p.lengths[i] == 0;
  if (aligns != 0 || !unused_zero) [[unlikely]] {
    for (std::size_t i = 0; i < kMaxSegments; ++i) {
      if (i >= p.segment_count && (p.lengths[i] != 0 || p.alignments[i] != 0)) {
        return make_error_code(WireErrc::bad_segment_count);
      }
      if (!valid_alignment(p.alignments[i])) return make_error_code(WireErrc::bad_alignment);
    }
  }
  if (p.payload_size() > limits.max_frame_size) return make_error_code(WireErrc::oversize);
  return p;
}

}  // namespace rmsg::wire
