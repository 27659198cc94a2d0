// The wire errors of the messenger's banner and frame decoder (src/msg/frame_decoder.h),
// an error_code category of their own ("rmsg.msg.wire") so a log line or a counter names
// exactly what the peer got wrong. Every one of them is fatal for the connection (the
// decoder stops); whether the session reconnects is the session's policy.
//
// Threading: any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <system_error>

namespace rmsg::wire {

// Values are stable: they index WireStats::errors and show up in logs.
enum class WireErrc : std::uint8_t {
  ok = 0,
  bad_magic = 1,          // the first 8 bytes are not the messenger's banner magic
  bad_banner = 2,         // banner CRC wrong, or its extension longer than allowed
  bad_version = 3,        // no protocol version both sides speak
  missing_features = 4,   // one side requires a feature bit the other does not support
  preamble_crc = 5,       // the preamble's CRC32C does not match (nothing in it is trusted)
  bad_segment_count = 6,  // more than kMaxSegments segments
  bad_alignment = 7,      // a segment alignment that is not 0 or a power of two
  bad_flags = 8,          // a flag or reserved preamble byte this version does not know
  unknown_type = 9,       // a frame type outside frame_types.h
  oversize = 10,          // the segments add up to more than the configured maximum
  segment_crc = 11,       // a segment's CRC32C (epilogue) does not match
  truncated = 12,         // the stream ended inside a banner or frame
};
inline constexpr std::size_t kWireErrcCount = 13;

// What one decoder saw (WireDecoder::stats()); the messenger sums its connections' with
// add() and exports the sum. Plain counters: one thread at a time.
struct WireStats {
  std::uint64_t banners = 0;                           // peer banners accepted
  std::uint64_t frames = 0;                            // frames decoded
  std::uint64_t bytes = 0;                             // bytes consumed
  std::array<std::uint64_t, kWireErrcCount> errors{};  // by WireErrc value (errors[0] unused)

  std::uint64_t errors_of(WireErrc e) const noexcept { return errors[static_cast<std::size_t>(e)]; }
  std::uint64_t total_errors() const noexcept;
  void add(const WireStats& other) noexcept;
};

const std::error_category& wire_category() noexcept;
std::error_code make_error_code(WireErrc e) noexcept;
const char* wire_errc_name(WireErrc e) noexcept;  // "preamble_crc", ...

}  // namespace rmsg::wire

template <>
struct std::is_error_code_enum<rmsg::wire::WireErrc> : std::true_type {};
