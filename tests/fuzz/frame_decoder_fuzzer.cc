// libFuzzer target: the messenger's banner + frame decoder (src/msg/frame_decoder.h), all
// that an unauthenticated peer's bytes reach before the session looks at a payload.
// Input: byte 0 selects the options (bit 0: a banner first; bit 1: a 64-byte frame limit;
// bit 2: we require feature bit 0; bit 3: the feed() decoder borrows, DecoderOptions::borrow),
// byte 1 seeds the chunking; the rest is the peer's bytes.
// Beyond fuzz_decoder_trace.h's per-input properties: feed() in one chunking and
// prepare()/commit() in another see the same events at the same offsets, and the stats
// count exactly what the events said. And, since the decoder's CRCs are checked only
// against the same code's encoder: the CRC32C in use equals the portable one over the
// input, whole and continued across a split the input chooses.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_decoder_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rmsg::wire;
  if (size < 2) return 0;
  const std::uint8_t mode = data[0];
  const std::uint8_t seed = data[1];
  const std::span<const std::byte> wire(reinterpret_cast<const std::byte*>(data) + 2, size - 2);

  const std::size_t cut = wire.empty() ? 0 : seed % wire.size();
  const auto whole = crc32c_portable(wire);
  fuzz::check(crc32c(wire) == whole && crc32c_hw(wire) == whole);
  fuzz::check(crc32c(wire.subspan(cut), crc32c_portable(wire.first(cut))) == whole);

  DecoderOptions o;
  o.expect_banner = (mode & 1) != 0;
  o.limits.max_frame_size = (mode & 2) != 0 ? 64 : 8192;  // inputs are <= 2048 bytes anyway
  o.local.supported = 0xFF;
  o.local.required = (mode & 4) != 0 ? 1 : 0;

  DecoderOptions borrowing = o;
  borrowing.borrow = (mode & 8) != 0;  // frames then point into `wire`, which stays unchanged
  WireDecoder a(borrowing);
  const auto t1 = fuzz::run_feed(a, wire, fuzz::Chunker(seed, 1 + (seed >> 4) * 16));
  WireDecoder b(o);
  const auto t2 = fuzz::run_prepare(b, wire, fuzz::Chunker(seed * 7u + 3, 1 + (seed & 15)));
  fuzz::check(t1 == t2);

  std::uint64_t frames = 0;
  std::uint64_t banners = 0;
  for (const auto& e : t1) {
    frames += e.kind == DecodeEvent::frame;
    banners += e.kind == DecodeEvent::banner;
  }
  fuzz::check(a.stats().frames == frames && b.stats().frames == frames);
  fuzz::check(a.stats().banners == banners && banners <= 1);
  fuzz::check(a.stats().bytes ==
              (t1.empty() || t1.back().kind != DecodeEvent::error ? wire.size() : t1.back().end));
  // End of stream: truncated exactly when bytes of an unfinished part are pending.
  if (t1.empty() || t1.back().kind != DecodeEvent::error) {
    const auto end = a.finish();
    const bool between = (t1.empty() ? 0 : t1.back().end) == wire.size();
    fuzz::check(between ? end == DecodeEvent::need_more : end == DecodeEvent::error);
  }
  return 0;
}
