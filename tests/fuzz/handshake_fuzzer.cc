// libFuzzer target: the messenger handshake. Today its wire part: both sides' banners and
// the frames that follow (the session layer will add its ident/reconnect payload decoding
// here). Input: side A's banner fields, side B's (each u16 min, u16 max, u64 supported,
// u64 required, little-endian: 20 bytes), then bytes both sides receive after the banner.
// Properties:
//   - negotiation is symmetric: A decoding B's banner and B decoding A's reach the same
//     outcome (the same version and features, or the same error), which is negotiate(A, B);
//   - what follows the banner gives both sides the same events (fuzz_decoder_trace.h).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_decoder_trace.h"
#include "wire/banner.h"
#include "wire/frame_bytes.h"

namespace {

using namespace rmsg::wire;

constexpr std::size_t kFields = 20;

Banner banner_at(const std::byte* p) {
  return Banner{load_le<std::uint16_t>(p), load_le<std::uint16_t>(p + 2),
                load_le<std::uint64_t>(p + 4), load_le<std::uint64_t>(p + 12)};
}

std::vector<fuzz::Event> side(const Banner& local, const Banner& peer,
                              std::span<const std::byte> after) {
  DecoderOptions o;
  o.local = local;
  o.limits.max_frame_size = 4096;
  std::vector<std::byte> wire;
  const auto b = encode_banner(peer);
  wire.insert(wire.end(), b.begin(), b.end());
  wire.insert(wire.end(), after.begin(), after.end());
  WireDecoder dec(o);
  auto trace =
      fuzz::run_feed(dec, wire, fuzz::Chunker(static_cast<std::uint32_t>(after.size()), 40));
  const auto expect = negotiate(local, peer);
  fuzz::check(!trace.empty());
  if (!expect) {
    fuzz::check(trace.size() == 1 && trace[0].kind == DecodeEvent::error &&
                dec.error() == expect.error() && !dec.banner_done());
  } else {
    fuzz::check(trace[0].kind == DecodeEvent::banner && dec.banner_done());
    fuzz::check(dec.negotiated().version == expect->version &&
                dec.negotiated().features == expect->features);
  }
  return trace;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2 * kFields) return 0;
  const auto* p = reinterpret_cast<const std::byte*>(data);
  const Banner a = banner_at(p);
  const Banner b = banner_at(p + kFields);
  const std::span<const std::byte> after(p + 2 * kFields, size - 2 * kFields);
  const auto at_a = side(a, b, after);  // A receives B's banner
  const auto at_b = side(b, a, after);  // B receives A's
  fuzz::check(at_a == at_b);
  return 0;
}
