// Shared by the messenger's fuzz targets: runs a WireDecoder over bytes in a chunking the
// input chooses, through feed() or through prepare()/commit(), and records what happened,
// checking on the way the properties every input must keep:
//   - an error is a WireErrc other than ok and truncated (truncated only comes from finish),
//     and after it the decoder consumes nothing more;
//   - every frame re-encodes (encode_frame_to, its segments and alignments) to exactly the
//     bytes it was decoded from; every segment honours its alignment.
// Violations trap (__builtin_trap): libFuzzer reports the input, the replay driver dies.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "wire/crc32c.h"
#include "wire/frame_decoder.h"
#include "wire/frame_encoder.h"

namespace rmsg::wire::fuzz {

inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

struct Event {
  DecodeEvent kind;
  std::size_t end;       // input offset just after the event's last byte
  std::uint32_t digest;  // frames: CRC32C of the re-encoding; errors: the code's value
  bool operator==(const Event&) const = default;
};

// Chunk sizes from a small xorshift seeded by the input, 1..max.
class Chunker {
 public:
  Chunker(std::uint32_t seed, std::size_t max) : x_(seed | 1), max_(max == 0 ? 1 : max) {}
  std::size_t next() {
    x_ ^= x_ << 13;
    x_ ^= x_ >> 17;
    x_ ^= x_ << 5;
    return 1 + x_ % max_;
  }

 private:
  std::uint32_t x_;
  std::size_t max_;
};

inline std::uint32_t check_frame(const Frame& f, std::span<const std::byte> wire) {
  std::vector<Segment> segs;
  for (std::size_t i = 0; i < f.segment_count(); ++i) {
    const auto s = f.segment(i);
    const auto a = f.alignment(i);
    check(a == 0 || s.empty() || reinterpret_cast<std::uintptr_t>(s.data()) % a == 0);
    segs.push_back({s, a});
  }
  std::vector<std::byte> again(encoded_frame_size(segs));
  auto n = encode_frame_to(again, f.type(), segs, FrameLimits{0xFFFFFFFF}, f.flags());
  check(n.ok() && n.value() == wire.size());
  check(std::memcmp(again.data(), wire.data(), wire.size()) == 0);
  return crc32c(again);
}

inline void on_error(WireDecoder& dec, std::vector<Event>& trace, std::size_t at) {
  const auto ec = dec.error();
  check(ec.category() == wire_category() && ec.value() > 0 &&
        ec.value() < static_cast<int>(kWireErrcCount) &&
        ec.value() != static_cast<int>(WireErrc::truncated));
  check(dec.stats().total_errors() == 1);
  trace.push_back({DecodeEvent::error, at, static_cast<std::uint32_t>(ec.value())});
}

// Through feed(), chunk sizes from `chunks`.
inline std::vector<Event> run_feed(WireDecoder& dec, std::span<const std::byte> wire,
                                   Chunker chunks) {
  std::vector<Event> trace;
  std::size_t at = 0;
  std::size_t start = 0;  // where the current frame began
  while (at < wire.size()) {
    std::span<const std::byte> in = wire.subspan(at, std::min(chunks.next(), wire.size() - at));
    while (!in.empty()) {
      const std::size_t before = in.size();
      const auto ev = dec.feed(in);
      at += before - in.size();
      if (ev == DecodeEvent::error) {
        on_error(dec, trace, at);
        std::span<const std::byte> more = wire.subspan(at);
        check(dec.feed(more) == DecodeEvent::error && more.size() == wire.size() - at);
        return trace;
      }
      if (ev == DecodeEvent::banner) {
        trace.push_back({ev, at, 0});
        start = at;
      }
      if (ev == DecodeEvent::frame) {
        const auto f = dec.take_frame();
        trace.push_back({ev, at, check_frame(f, wire.subspan(start, at - start))});
        start = at;
      }
    }
  }
  return trace;
}

// Through prepare()/commit(), at most `chunks.next()` bytes per commit.
inline std::vector<Event> run_prepare(WireDecoder& dec, std::span<const std::byte> wire,
                                      Chunker chunks) {
  std::vector<Event> trace;
  std::size_t at = 0;
  std::size_t start = 0;
  while (at < wire.size()) {
    const auto buf = dec.prepare();
    check(!buf.empty());
    const std::size_t n = std::min<std::size_t>({buf.size(), wire.size() - at, chunks.next()});
    std::memcpy(buf.data(), wire.data() + at, n);
    at += n;
    const auto ev = dec.commit(n);
    if (ev == DecodeEvent::error) {
      on_error(dec, trace, at);
      check(dec.prepare().empty());
      return trace;
    }
    if (ev == DecodeEvent::banner) {
      trace.push_back({ev, at, 0});
      start = at;
    }
    if (ev == DecodeEvent::frame) {
      const auto f = dec.take_frame();
      trace.push_back({ev, at, check_frame(f, wire.subspan(start, at - start))});
      start = at;
    }
  }
  return trace;
}

}  // namespace rmsg::wire::fuzz
