// The "rmsg.msg.wire" error category, WireStats and frame type names.
#include "wire/frame_errors.h"

#include <string>

#include "base/retry_rules.h"
#include "wire/frame_types.h"

namespace rmsg::wire {
namespace {

class WireCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "rmsg.msg.wire"; }
  std::string message(int code) const override {
    if (code < 0 || static_cast<std::size_t>(code) >= kWireErrcCount) {
      return "unknown messenger wire error " + std::to_string(code);
    }
    return std::string("messenger wire: ") + wire_errc_name(static_cast<WireErrc>(code));
  }
};

}  // namespace

const char* wire_errc_name(WireErrc e) noexcept {
  switch (e) {
    case WireErrc::ok:
      return "ok";
    case WireErrc::bad_magic:
      return "bad_magic";
    case WireErrc::bad_banner:
      return "bad_banner";
    case WireErrc::bad_version:
      return "bad_version";
    case WireErrc::missing_features:
      return "missing_features";
    case WireErrc::preamble_crc:
      return "preamble_crc";
    case WireErrc::bad_segment_count:
      return "bad_segment_count";
    case WireErrc::bad_alignment:
      return "bad_alignment";
    case WireErrc::bad_flags:
      return "bad_flags";
    case WireErrc::unknown_type:
      return "unknown_type";
    case WireErrc::oversize:
      return "oversize";
    case WireErrc::segment_crc:
      return "segment_crc";
    case WireErrc::truncated:
      return "truncated";
  }
  return "unknown";
}

const std::error_category& wire_category() noexcept {
  static const WireCategory category;
  // Malformed bytes: never retryable; a stream that ended inside a frame lost its connection.
  static const bool rule = register_retryable(category, 0, [](int code) noexcept {
    if (code <= 0 || code >= static_cast<int>(kWireErrcCount)) return ErrorKind::other;
    return code == static_cast<int>(WireErrc::truncated) ? ErrorKind::connection_lost
                                                         : ErrorKind::protocol;
  });
  static_cast<void>(rule);
  return category;
}

std::error_code make_error_code(WireErrc e) noexcept {
  return {static_cast<int>(e), wire_category()};
}

std::uint64_t WireStats::total_errors() const noexcept {
  std::uint64_t n = 0;
  for (std::size_t i = 1; i < errors.size(); ++i) n += errors[i];
  return n;
}

void WireStats::add(const WireStats& other) noexcept {
  banners += other.banners;
  frames += other.frames;
  bytes += other.bytes;
  for (std::size_t i = 0; i < errors.size(); ++i) errors[i] += other.errors[i];
}

const char* frame_type_name(FrameType t) noexcept {
  switch (t) {
    case FrameType::hello:
      return "hello";
    case FrameType::client_ident:
      return "client_ident";
    case FrameType::server_ident:
      return "server_ident";
    case FrameType::ident_missing_features:
      return "ident_missing_features";
    case FrameType::session_reconnect:
      return "session_reconnect";
    case FrameType::session_reconnect_ok:
      return "session_reconnect_ok";
    case FrameType::session_retry:
      return "session_retry";
    case FrameType::session_retry_global:
      return "session_retry_global";
    case FrameType::session_reset:
      return "session_reset";
    case FrameType::wait:
      return "wait";
    case FrameType::message:
      return "message";
    case FrameType::ack:
      return "ack";
    case FrameType::keepalive:
      return "keepalive";
    case FrameType::keepalive_ack:
      return "keepalive_ack";
    case FrameType::close:
      return "close";
    case FrameType::auth_proof:
      return "auth_proof";
  }
  return "unknown";
}

}  // namespace rmsg::wire
