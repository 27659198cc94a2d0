// Helpers for the messenger wire tests: frames as contiguous bytes, and a decoder driven
// over a byte string in given chunk sizes, recording its events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "wire/banner.h"
#include "wire/frame_decoder.h"
#include "wire/frame_encoder.h"

namespace rmsg::wire::wire_test {

inline std::vector<std::byte> bytes_of(std::string_view s) {
  const auto b = std::as_bytes(std::span<const char>(s.data(), s.size()));
  return {b.begin(), b.end()};
}

inline void append(std::vector<std::byte>& out, std::span<const std::byte> b) {
  out.insert(out.end(), b.begin(), b.end());
}

// One frame, contiguous (encode_frame_to); fails the test on error.
inline std::vector<std::byte> frame_bytes(FrameType type, std::span<const Segment> segments,
                                          FrameLimits limits = {}) {
  std::vector<std::byte> out(encoded_frame_size(segments));
  auto n = encode_frame_to(out, type, segments, limits);
  if (!n) return {};
  out.resize(n.value());
  return out;
}

struct Decoded {
  std::size_t banners = 0;
  std::vector<Frame> frames;
  std::error_code error;  // the first error event's
};

// Feeds `wire` in chunks whose sizes `chunk` returns (>= 1), collecting every event.
inline Decoded decode_all(WireDecoder& dec, std::span<const std::byte> wire,
                          const std::function<std::size_t()>& chunk) {
  Decoded d;
  while (!wire.empty() && !d.error) {
    const std::size_t n = std::min(wire.size(), chunk());
    std::span<const std::byte> in = wire.first(n);
    wire = wire.subspan(n);
    while (!in.empty() && !d.error) {
      switch (dec.feed(in)) {
        case DecodeEvent::need_more:
          break;
        case DecodeEvent::banner:
          ++d.banners;
          break;
        case DecodeEvent::frame:
          d.frames.push_back(dec.take_frame());
          break;
        case DecodeEvent::error:
          d.error = dec.error();
          break;
      }
    }
  }
  return d;
}

inline Decoded decode_all(WireDecoder& dec, std::span<const std::byte> wire, std::size_t chunk) {
  return decode_all(dec, wire, [chunk] { return chunk; });
}

inline DecoderOptions with_local(const Banner& local) {
  DecoderOptions o;
  o.local = local;
  return o;
}

inline DecoderOptions frames_only(FrameLimits limits = {}) {
  DecoderOptions o;
  o.expect_banner = false;
  o.limits = limits;
  return o;
}

}  // namespace rmsg::wire::wire_test
