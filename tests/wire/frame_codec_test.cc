// Frames round trip: encoder (gather list and contiguous) to decoder, in chunks of every
// size down to one byte, through feed() and through prepare()/commit(); the preamble's
// bytes as docs/protocol.md lists them; segment alignment honoured on receive.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kit/seed.h"
#include "wire/crc32c.h"
#include "wire/frame_bytes.h"
#include "wire/frame_errors.h"
#include "wire/wire_test_util.h"

namespace rmsg::wire {
namespace {

using wire_test::append;
using wire_test::decode_all;
using wire_test::frame_bytes;
using wire_test::frames_only;

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

TEST(FrameCodec, PreambleBytesAreAsDocumented) {
  const auto a = wire_test::bytes_of("abc");
  const auto b = wire_test::bytes_of("defgh");
  const Segment segs[] = {{a, 0}, {b, 8}};
  const auto f = frame_bytes(FrameType::message, segs);
  ASSERT_EQ(f.size(), 32u + 3 + 5 + 8);
  EXPECT_EQ(f[0], std::byte{11});  // message
  EXPECT_EQ(f[1], std::byte{0});   // flags
  EXPECT_EQ(f[2], std::byte{2});   // segments
  EXPECT_EQ(f[3], std::byte{0});   // key phase
  EXPECT_EQ(wire::load_le<std::uint32_t>(f.data() + 4), 3u);
  EXPECT_EQ(wire::load_le<std::uint32_t>(f.data() + 8), 5u);
  EXPECT_EQ(wire::load_le<std::uint32_t>(f.data() + 12), 0u);
  EXPECT_EQ(wire::load_le<std::uint16_t>(f.data() + 20), 0u);
  EXPECT_EQ(wire::load_le<std::uint16_t>(f.data() + 22), 8u);
  EXPECT_EQ(wire::load_le<std::uint32_t>(f.data() + 28),
            crc32c(std::span<const std::byte>(f.data(), 28)));
  EXPECT_TRUE(same({f.data() + 32, 3}, a));
  EXPECT_TRUE(same({f.data() + 35, 5}, b));
  EXPECT_EQ(wire::load_le<std::uint32_t>(f.data() + 40), crc32c(a));
  EXPECT_EQ(wire::load_le<std::uint32_t>(f.data() + 44), crc32c(b));
}

TEST(FrameCodec, GatherListMatchesContiguousAndSurvivesPartialWrites) {
  auto rng = rmsg::testing::test_rng("gather");
  const auto big = random_bytes(rng, 100000);
  const auto small = random_bytes(rng, 17);
  const Segment segs[] = {{small}, {}, {big, 4096}};
  EncodedFrame ef;
  ASSERT_TRUE(encode_frame(FrameType::message, segs, {}, ef));
  const auto flat = frame_bytes(FrameType::message, segs);
  ASSERT_EQ(ef.total_size(), flat.size());
  // The big segment is referenced, not copied.
  bool references_big = false;
  for (const auto& part : ef.iov()) references_big |= part.data() == big.data();
  EXPECT_TRUE(references_big);
  // Written in random pieces, the bytes are the contiguous encoding.
  std::vector<std::byte> out;
  EncodedFrame moved = ef;  // copies stay valid (gather list rebuilt per call)
  while (!moved.done()) {
    std::size_t budget = 1 + rng() % 5000;
    std::size_t wrote = 0;
    for (const auto& part : moved.iov()) {
      const std::size_t n = std::min(budget, part.size());
      append(out, part.first(n));
      budget -= n;
      wrote += n;
      if (budget == 0) break;
    }
    moved.consume(wrote);
  }
  EXPECT_TRUE(same(out, flat));
  EXPECT_TRUE(moved.iov().empty());
}

TEST(FrameCodec, RoundTripsInEveryChunkSize) {
  auto rng = rmsg::testing::test_rng("roundtrip");
  std::vector<std::vector<std::byte>> payloads;
  std::vector<std::byte> wire;
  std::vector<std::array<std::size_t, 4>> sizes;
  for (int i = 0; i < 40; ++i) {
    const std::size_t count = i % 5;
    std::vector<Segment> segs;
    std::array<std::size_t, 4> sz{};
    for (std::size_t s = 0; s < count; ++s) {
      sz[s] = rng() % 3 == 0 ? 0 : rng() % 300;
      payloads.push_back(random_bytes(rng, sz[s]));
      segs.push_back({payloads.back(), static_cast<std::uint16_t>(s == 3 ? 64 : 0)});
    }
    sizes.push_back(sz);
    append(wire, frame_bytes(static_cast<FrameType>(1 + i % kLastFrameType), segs));
  }
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{31},
                                  std::size_t{33}, std::size_t{4096}, wire.size()}) {
    WireDecoder dec(frames_only());
    const auto d = decode_all(dec, wire, chunk);
    ASSERT_FALSE(d.error) << "chunk " << chunk << ": " << d.error.message();
    ASSERT_EQ(d.frames.size(), 40u) << "chunk " << chunk;
    std::size_t p = 0;
    for (std::size_t i = 0; i < d.frames.size(); ++i) {
      const auto& f = d.frames[i];
      EXPECT_EQ(static_cast<int>(f.type()), static_cast<int>(1 + i % kLastFrameType));
      ASSERT_EQ(f.segment_count(), i % 5);
      for (std::size_t s = 0; s < f.segment_count(); ++s, ++p) {
        ASSERT_TRUE(same(f.segment(s), payloads[p])) << "frame " << i << " seg " << s;
        EXPECT_EQ(f.segment(s).size(), sizes[i][s]);
        if (s == 3 && !f.segment(s).empty()) {
          EXPECT_EQ(reinterpret_cast<std::uintptr_t>(f.segment(s).data()) % 64, 0u);
        }
      }
    }
    EXPECT_EQ(dec.stats().frames, 40u);
    EXPECT_EQ(dec.stats().bytes, wire.size());
    EXPECT_EQ(dec.finish(), DecodeEvent::need_more);  // ended between frames
  }
}

TEST(FrameCodec, RandomChunkingRoundTrips) {
  auto rng = rmsg::testing::test_rng("chunking");
  const auto payload = random_bytes(rng, 20000);
  std::vector<std::byte> wire;
  for (int i = 0; i < 20; ++i) {
    const std::size_t len = rng() % payload.size();
    const Segment segs[] = {{std::span(payload).first(len), 4096}};
    append(wire, frame_bytes(FrameType::message, segs));
  }
  WireDecoder dec(frames_only());
  const auto d = decode_all(dec, wire, [&] { return 1 + rng() % 3000; });
  ASSERT_FALSE(d.error) << d.error.message();
  EXPECT_EQ(d.frames.size(), 20u);
  for (const auto& f : d.frames) {
    EXPECT_TRUE(same(f.segment(0), std::span(payload).first(f.segment(0).size())));
    if (!f.segment(0).empty()) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(f.segment(0).data()) % 4096, 0u);
    }
  }
}

TEST(FrameCodec, PrepareCommitReadsStraightIntoTheFrame) {
  auto rng = rmsg::testing::test_rng("prepare");
  const auto big = random_bytes(rng, 50000);
  const Segment segs[] = {{big, 4096}};
  const auto wire = frame_bytes(FrameType::message, segs);
  WireDecoder dec(frames_only());
  std::size_t at = 0;
  DecodeEvent ev = DecodeEvent::need_more;
  std::size_t parts = 0;
  while (at < wire.size() && ev == DecodeEvent::need_more) {
    const auto buf = dec.prepare();
    ASSERT_FALSE(buf.empty());
    if (buf.size() == big.size()) {  // the segment: its storage, aligned
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf.data()) % 4096, 0u);
    }
    const std::size_t n = std::min({buf.size(), wire.size() - at, std::size_t{1 + rng() % 20000}});
    std::memcpy(buf.data(), wire.data() + at, n);
    at += n;
    ev = dec.commit(n);
    ++parts;
  }
  ASSERT_EQ(ev, DecodeEvent::frame) << dec.error().message();
  EXPECT_EQ(at, wire.size());
  const auto f = dec.take_frame();
  EXPECT_TRUE(same(f.segment(0), big));
  EXPECT_GE(parts, 3u);  // preamble, segment, epilogue: never two parts in one buffer
}

TEST(FrameCodec, EncoderRejectsWhatThePeerWould) {
  const auto a = wire_test::bytes_of("x");
  EncodedFrame ef;
  const Segment five[] = {{a}, {a}, {a}, {a}, {a}};
  EXPECT_TRUE(encode_frame(FrameType::message, five, {}, ef).is(Errc::invalid_argument));
  const Segment odd[] = {{a, 3}};
  EXPECT_TRUE(encode_frame(FrameType::message, odd, {}, ef).is(Errc::invalid_argument));
  const Segment one[] = {{a}};
  EXPECT_TRUE(encode_frame(static_cast<FrameType>(0), one, {}, ef).is(Errc::invalid_argument));
  EXPECT_TRUE(
      encode_frame(FrameType::message, one, {}, ef, kFlagSecure).is(Errc::invalid_argument));
  EXPECT_EQ(encode_frame(FrameType::message, one, {.max_frame_size = 0}, ef).error(),
            make_error_code(WireErrc::oversize));
  std::array<std::byte, 36> small{};
  EXPECT_TRUE(encode_frame_to(small, FrameType::message, one, {}).is(Errc::resource_exhausted));
  std::array<std::byte, 37> fits{};
  EXPECT_TRUE(encode_frame_to(fits, FrameType::message, one, {}));
}

TEST(FrameCodec, EmptyFrameHasNoEpilogue) {
  const auto f = frame_bytes(FrameType::keepalive, {});
  EXPECT_EQ(f.size(), kPreambleSize);
  WireDecoder dec(frames_only());
  std::span<const std::byte> in = f;
  ASSERT_EQ(dec.feed(in), DecodeEvent::frame);
  const auto fr = dec.take_frame();
  EXPECT_EQ(fr.type(), FrameType::keepalive);
  EXPECT_EQ(fr.segment_count(), 0u);
  EXPECT_EQ(fr.payload_size(), 0u);
}

TEST(FrameCodec, MovedFromFrameHasNoSegments) {
  const auto a = wire_test::bytes_of("abc");
  const Segment seg{a};
  const auto bytes = frame_bytes(FrameType::message, {&seg, 1});
  WireDecoder dec(frames_only());
  std::span<const std::byte> in = bytes;
  ASSERT_EQ(dec.feed(in), DecodeEvent::frame);
  Frame f = dec.take_frame();
  Frame g = std::move(f);
  EXPECT_EQ(g.segment(0).size(), 3u);
  EXPECT_TRUE(f.segment(0).empty());  // NOLINT(bugprone-use-after-move): the contract
  EXPECT_TRUE(dec.take_frame().segment(0).empty());  // taken once
}

}  // namespace
}  // namespace rmsg::wire
