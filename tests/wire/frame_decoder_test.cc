// Every error path of the frame decoder: which WireErrc, counted once, sticky, and nothing
// allocated from a length that did not pass the checks (global operator new is counted).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <utility>

#include "wire/frame_errors.h"
#include "wire/wire_test_util.h"

namespace {
// Bytes requested from operator new while `counting` is set (this binary only).
std::atomic<bool> counting{false};
std::atomic<std::size_t> counted{0};
void* counted_alloc(std::size_t n, std::size_t align) {
  if (counting.load(std::memory_order_relaxed)) counted += n;
  void* p =
      align <= alignof(std::max_align_t)
          ? std::malloc(n == 0 ? 1 : n)
          : std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) {
  return counted_alloc(n, 0);
}
void* operator new[](std::size_t n) {
  return counted_alloc(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace rmsg::wire {
namespace {

using wire_test::append;
using wire_test::decode_all;
using wire_test::frame_bytes;
using wire_test::frames_only;

// A preamble as a hostile peer may write it: any fields, a valid CRC.
std::vector<std::byte> crafted(const Preamble& p) {
  std::vector<std::byte> out(kPreambleSize);
  encode_preamble(p, std::span<std::byte, kPreambleSize>(out.data(), kPreambleSize));
  return out;
}

Preamble preamble(std::uint8_t count, std::uint32_t len = 1) {
  Preamble p;
  p.segment_count = count;
  for (std::size_t i = 0; i < std::min<std::size_t>(count, kMaxSegments); ++i) p.lengths[i] = len;
  return p;
}

// Decodes `wire` whole, then one byte at a time; both must fail with `want`, counted once.
void expect_error(const std::vector<std::byte>& wire, WireErrc want, FrameLimits limits = {}) {
  for (const std::size_t chunk : {wire.size(), std::size_t{1}}) {
    WireDecoder dec(frames_only(limits));
    const auto d = decode_all(dec, wire, chunk);
    EXPECT_EQ(d.error, make_error_code(want)) << "chunk " << chunk << ": " << d.error.message();
    EXPECT_EQ(dec.stats().errors_of(want), 1u);
    EXPECT_EQ(dec.stats().total_errors(), 1u);
    EXPECT_TRUE(d.frames.empty());
    std::span<const std::byte> more = wire;
    EXPECT_EQ(dec.feed(more), DecodeEvent::error);  // sticky
    EXPECT_EQ(more.size(), wire.size());            // and consumes nothing
    EXPECT_EQ(dec.finish(), DecodeEvent::error);
  }
}

TEST(FrameDecoderErrors, AnyBitFlipInThePreambleFailsItsCrc) {
  const auto a = wire_test::bytes_of("payload");
  const Segment seg{a};
  const auto good = frame_bytes(FrameType::message, {&seg, 1});
  for (std::size_t bit = 0; bit < kPreambleSize * 8; ++bit) {
    auto bad = good;
    bad[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    WireDecoder dec(frames_only());
    const auto d = decode_all(dec, bad, bad.size());
    ASSERT_EQ(d.error, make_error_code(WireErrc::preamble_crc)) << "bit " << bit;
  }
}

TEST(FrameDecoderErrors, CrcIsCheckedBeforeAnyLength) {
  auto p = crafted(preamble(4, 0xFFFFFFFF));
  p[28] ^= std::byte{1};
  expect_error(p, WireErrc::preamble_crc);
}

TEST(FrameDecoderErrors, CorruptSegmentOrEpilogueFailsTheSegmentCrc) {
  const auto a = wire_test::bytes_of("first segment");
  const auto b = wire_test::bytes_of("second");
  const Segment segs[] = {{a}, {b}};
  const auto good = frame_bytes(FrameType::message, segs);
  for (std::size_t at = kPreambleSize; at < good.size(); ++at) {
    auto bad = good;
    bad[at] ^= std::byte{0x80};
    WireDecoder dec(frames_only());
    ASSERT_EQ(decode_all(dec, bad, 3).error, make_error_code(WireErrc::segment_crc)) << at;
  }
}

TEST(FrameDecoderErrors, OversizeIsRejectedWithNothingAllocated) {
  const auto huge = crafted(preamble(4, 0xFFFFFFFF));  // 16 GiB, the u32 sum would wrap
  WireDecoder dec(frames_only({.max_frame_size = 0xFFFFFFFF}));
  std::span<const std::byte> in = huge;
  counted = 0;
  counting = true;
  const auto ev = dec.feed(in);
  counting = false;
  EXPECT_EQ(ev, DecodeEvent::error);
  EXPECT_EQ(dec.error(), make_error_code(WireErrc::oversize));
  EXPECT_EQ(counted.load(), 0u);
  expect_error(huge, WireErrc::oversize);

  // The limit is inclusive, on the sum of all segments.
  auto at_limit = preamble(2, 500);
  expect_error(crafted(at_limit), WireErrc::oversize, {.max_frame_size = 999});
  WireDecoder ok(frames_only({.max_frame_size = 1000}));
  const auto at_limit_bytes = crafted(at_limit);
  std::span<const std::byte> pre = at_limit_bytes;
  counted = 0;
  counting = true;
  EXPECT_EQ(ok.feed(pre), DecodeEvent::need_more);  // now waits for the segments
  counting = false;
  EXPECT_GE(counted.load(), 1000u);  // and only now allocated them
}

TEST(FrameDecoderErrors, TooManySegmentsOrStrayLengths) {
  expect_error(crafted(preamble(5)), WireErrc::bad_segment_count);
  expect_error(crafted(preamble(255)), WireErrc::bad_segment_count);
  auto stray = preamble(1);
  stray.lengths[2] = 9;  // beyond the count
  expect_error(crafted(stray), WireErrc::bad_segment_count);
  auto stray_align = preamble(0);
  stray_align.alignments[3] = 8;
  expect_error(crafted(stray_align), WireErrc::bad_segment_count);
}

TEST(FrameDecoderErrors, AlignmentMustBeAPowerOfTwo) {
  auto p = preamble(1);
  p.alignments[0] = 24;
  expect_error(crafted(p), WireErrc::bad_alignment);
  p.alignments[0] = 32768;
  WireDecoder dec(frames_only());
  const auto bytes = crafted(p);
  std::span<const std::byte> in = bytes;
  EXPECT_EQ(dec.feed(in), DecodeEvent::need_more);
}

// Slots are checked in order, each for both errors: the first bad slot names the error.
TEST(FrameDecoderErrors, SlotErrorsInSlotOrder) {
  auto p = preamble(2);
  p.alignments[0] = 24;
  p.lengths[3] = 9;
  expect_error(crafted(p), WireErrc::bad_alignment);
  auto q = preamble(1);
  q.alignments[0] = 8;
  q.lengths[1] = 9;
  q.alignments[2] = 3;
  expect_error(crafted(q), WireErrc::bad_segment_count);
}

TEST(FrameDecoderErrors, ReservedFlagsAndKeyPhaseAreRejected) {
  auto p = preamble(1);
  p.flags = kFlagSecure;
  expect_error(crafted(p), WireErrc::bad_flags);
  p.flags = 0x80;
  expect_error(crafted(p), WireErrc::bad_flags);
  p.flags = 0;
  p.key_phase = 1;
  expect_error(crafted(p), WireErrc::bad_flags);
}

TEST(FrameDecoderErrors, UnknownTypes) {
  for (const int t : {0, kLastFrameType + 1, 17, 31, 255}) {
    auto p = preamble(0);
    p.type = static_cast<FrameType>(t);
    expect_error(crafted(p), WireErrc::unknown_type);
  }
}

TEST(FrameDecoderErrors, EveryTruncationIsReportedAtEndOfStream) {
  const auto a = wire_test::bytes_of("abcdefgh");
  const Segment segs[] = {{a}, {}, {a}};
  const auto f = frame_bytes(FrameType::message, segs);
  for (std::size_t cut = 1; cut < f.size(); ++cut) {
    WireDecoder dec(frames_only());
    std::span<const std::byte> in(f.data(), cut);
    ASSERT_EQ(dec.feed(in), DecodeEvent::need_more) << cut;
    ASSERT_EQ(dec.finish(), DecodeEvent::error) << cut;
    EXPECT_EQ(dec.error(), make_error_code(WireErrc::truncated));
    EXPECT_EQ(dec.stats().errors_of(WireErrc::truncated), 1u);
  }
}

TEST(FrameDecoderErrors, ErrorAfterGoodFramesKeepsThem) {
  const auto a = wire_test::bytes_of("ok");
  const Segment seg{a};
  std::vector<std::byte> wire;
  append(wire, frame_bytes(FrameType::ack, {&seg, 1}));
  append(wire, frame_bytes(FrameType::ack, {&seg, 1}));
  wire.push_back(std::byte{0});
  wire.resize(wire.size() + kPreambleSize - 1);  // a zeroed preamble: bad CRC
  WireDecoder dec(frames_only());
  const auto d = decode_all(dec, wire, 5);
  EXPECT_EQ(d.frames.size(), 2u);
  EXPECT_EQ(d.error, make_error_code(WireErrc::preamble_crc));
  EXPECT_EQ(dec.stats().frames, 2u);
  WireStats sum;
  sum.add(dec.stats());
  sum.add(dec.stats());
  EXPECT_EQ(sum.errors_of(WireErrc::preamble_crc), 2u);
  EXPECT_EQ(sum.frames, 4u);
}

// A frame handed back (recycle) lends its block to the next one: no allocation while it is
// large enough, a fresh block (and the right bytes) when it is not, none kept past the bound.
TEST(FrameDecoderRecycle, TheNextFrameReusesTheBlockWhileItFits) {
  const auto small = wire_test::bytes_of("0123456789");
  const auto big = std::vector<std::byte>(3000, std::byte{0x7e});
  const auto huge = std::vector<std::byte>(WireDecoder::kRecycleMax + 1, std::byte{0x11});
  auto frame_of = [](std::span<const std::byte> b) {
    const Segment seg{b};
    return frame_bytes(FrameType::message, {&seg, 1});
  };
  WireDecoder dec(frames_only());
  auto decode_one = [&dec](const std::vector<std::byte>& wire) {
    std::span<const std::byte> in = wire;
    EXPECT_EQ(dec.feed(in), DecodeEvent::frame);
    EXPECT_TRUE(in.empty());
    return dec.take_frame();
  };
  Frame first = decode_one(frame_of(small));
  const std::byte* block = first.segment(0).data();
  dec.recycle(std::move(first));
  const auto again = frame_of(small);
  counting = true;
  counted = 0;
  Frame second = decode_one(again);
  counting = false;
  EXPECT_EQ(counted.load(), 0u);  // the recycled block
  EXPECT_EQ(second.segment(0).data(), block);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), second.segment(0).begin()));
  dec.recycle(std::move(second));
  // Allocations while decoding `wire` (the wire itself is built before).
  auto allocated_by = [&](const std::vector<std::byte>& wire) {
    counting = true;
    counted = 0;
    Frame f = decode_one(wire);
    counting = false;
    return std::make_pair(counted.load(), std::move(f));
  };
  auto [n_big, larger] = allocated_by(frame_of(big));  // does not fit: a new block
  EXPECT_GE(n_big, big.size());
  ASSERT_EQ(larger.segment(0).size(), big.size());
  EXPECT_TRUE(std::equal(big.begin(), big.end(), larger.segment(0).begin()));
  Frame over = decode_one(frame_of(huge));
  dec.recycle(std::move(over));  // past kRecycleMax: freed, not kept
  auto [n_after, after] = allocated_by(frame_of(small));
  EXPECT_GT(n_after, 0u);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), after.segment(0).begin()));
}

// DecoderOptions::borrow: a frame that lies whole in the input and asks no alignment points
// into the input (no copy, no allocation, the recycled block stays); one with an aligned
// segment, one split across feeds and a frame with a bad CRC are handled as without it.
TEST(FrameDecoderBorrow, AWholeUnalignedFramePointsIntoTheInput) {
  DecoderOptions opts = frames_only();
  opts.borrow = true;
  WireDecoder dec(opts);
  const auto a = wire_test::bytes_of("header-bytes");
  const auto b = wire_test::bytes_of("and the payload");
  const Segment segs[2] = {{a}, {b}};
  const auto wire = frame_bytes(FrameType::message, segs);
  std::span<const std::byte> in = wire;
  counting = true;
  counted = 0;
  ASSERT_EQ(dec.feed(in), DecodeEvent::frame);
  Frame f = dec.take_frame();
  counting = false;
  EXPECT_EQ(counted.load(), 0u);
  EXPECT_TRUE(in.empty());
  EXPECT_TRUE(f.borrowed());
  ASSERT_EQ(f.segment_count(), 2u);
  EXPECT_EQ(f.segment(0).data(), wire.data() + kPreambleSize);
  EXPECT_EQ(f.segment(1).data(), wire.data() + kPreambleSize + a.size());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), f.segment(0).begin(), f.segment(0).end()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), f.segment(1).begin(), f.segment(1).end()));
  Frame moved = std::move(f);
  EXPECT_TRUE(f.segment(0).empty());  // NOLINT(bugprone-use-after-move): the contract
  EXPECT_FALSE(f.borrowed());         // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved.segment(1).size(), b.size());
  dec.recycle(std::move(moved));  // nothing to give back

  // An aligned segment is placed as asked: copied into storage of the frame's own.
  const std::vector<std::byte> data(100, std::byte{0x42});
  const Segment aligned{data, 64};
  const auto wire2 = frame_bytes(FrameType::message, {&aligned, 1});
  in = wire2;
  ASSERT_EQ(dec.feed(in), DecodeEvent::frame);
  Frame g = dec.take_frame();
  EXPECT_FALSE(g.borrowed());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(g.segment(0).data()) % 64, 0u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), g.segment(0).begin(), g.segment(0).end()));

  // Split across two feeds: assembled in storage, not borrowed.
  const auto wire3 = frame_bytes(FrameType::message, segs);
  std::span<const std::byte> head = std::span(wire3).first(40);
  std::span<const std::byte> rest = std::span(wire3).subspan(40);
  EXPECT_EQ(dec.feed(head), DecodeEvent::need_more);
  ASSERT_EQ(dec.feed(rest), DecodeEvent::frame);
  Frame h = dec.take_frame();
  EXPECT_FALSE(h.borrowed());
  EXPECT_TRUE(std::equal(b.begin(), b.end(), h.segment(1).begin(), h.segment(1).end()));

  // A bad segment CRC still fails (the bytes are checked where they lie).
  auto bad = frame_bytes(FrameType::message, segs);
  bad[kPreambleSize + 1] ^= std::byte{0x01};
  in = bad;
  EXPECT_EQ(dec.feed(in), DecodeEvent::error);
  EXPECT_EQ(dec.error(), make_error_code(WireErrc::segment_crc));
  EXPECT_TRUE(dec.take_frame().segment(0).empty());
}

TEST(FrameDecoderErrors, ErrorsHaveNames) {
  EXPECT_EQ(make_error_code(WireErrc::segment_crc).message(), "messenger wire: segment_crc");
  EXPECT_STREQ(make_error_code(WireErrc::oversize).category().name(), "rmsg.msg.wire");
  EXPECT_STREQ(frame_type_name(FrameType::session_retry_global), "session_retry_global");
}

}  // namespace
}  // namespace rmsg::wire
