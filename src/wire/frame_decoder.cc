// The banner and frame decoder's state machine (frame_decoder.h).
#include "wire/frame_decoder.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "wire/crc32c.h"
#include "wire/frame_bytes.h"

namespace rmsg::wire {
namespace {

constexpr std::size_t kMagicSize = kBannerMagic.size();

std::size_t align_up(std::size_t v, std::size_t a) noexcept {  // a: a power of two
  return (v + a - 1) & ~(a - 1);
}

}  // namespace

// ---- Frame

void detail::AlignedDelete::operator()(std::byte* p) const noexcept {
  ::operator delete (p, std::align_val_t{alignment});
}

void Frame::allocate(const Preamble& p) {
  preamble_ = p;
  view_ = nullptr;
  std::size_t end = 0;
  std::size_t max_align = alignof(std::max_align_t);
  for (std::size_t i = 0; i < p.segment_count; ++i) {
    const std::size_t a = std::max<std::size_t>(p.alignments[i], 1);
    max_align = std::max(max_align, a);
    offsets_[i] = align_up(end, a);
    end = offsets_[i] + p.lengths[i];
  }
  if (end == 0) return;  // a kept block stays for the next frame
  if (storage_ && capacity_ >= end && storage_.get_deleter().alignment >= max_align) return;
  storage_.reset();
  capacity_ = 0;
  storage_ = std::unique_ptr<std::byte[], detail::AlignedDelete>(
      static_cast<std::byte*>(::operator new (end, std::align_val_t{max_align})),
      detail::AlignedDelete{max_align});
  capacity_ = end;
}

void Frame::borrow(const Preamble& p, const std::byte* at) noexcept {
  preamble_ = p;
  std::size_t end = 0;
  for (std::size_t i = 0; i < p.segment_count; ++i) {
    offsets_[i] = end;
    end += p.lengths[i];
  }
  view_ = at;
}

std::span<std::byte> Frame::storage(std::size_t i) noexcept {
  if (!storage_ || i >= preamble_.segment_count || preamble_.lengths[i] == 0) return {};
  return {storage_.get() + offsets_[i], preamble_.lengths[i]};
}

// ---- WireDecoder

WireDecoder::WireDecoder(DecoderOptions options) : options_(options), state_(State::failed) {
  if (options_.expect_banner) {
    expect(State::banner_magic, kMagicSize);
  } else {
    banner_done_ = true;
    expect(State::preamble, kPreambleSize);
  }
}

void WireDecoder::expect(State s, std::size_t need) noexcept {
  state_ = s;
  need_ = need;
  if (s != State::banner_head && s != State::banner_rest) have_ = 0;  // banner parts append
}

std::span<std::byte> WireDecoder::target() noexcept {
  switch (state_) {
    case State::segment:
      return frame_.storage(segment_).subspan(have_);
    case State::frame_ready:
    case State::failed:
      return {};
    default:
      return std::span<std::byte>(staging_).subspan(have_, need_ - have_);
  }
}

DecodeEvent WireDecoder::feed(std::span<const std::byte>& in) {
  while (true) {
    if (state_ == State::failed) return DecodeEvent::error;
    if (state_ == State::frame_ready) expect(State::preamble, kPreambleSize);
    if (state_ == State::preamble && have_ == 0 && in.size() >= kPreambleSize) {
      if (const auto ev = feed_whole(in)) return *ev;
    }
    if (in.empty()) return DecodeEvent::need_more;
    const auto t = target();
    const std::size_t n = std::min(t.size(), in.size());
    std::memcpy(t.data(), in.data(), n);
    in = in.subspan(n);
    if (const auto ev = advance(n); ev != DecodeEvent::need_more) return ev;
  }
}

// The same checks, copies, CRCs, counts and events as the part-by-part path below, in one
// pass over a frame that lies whole in `in` (small frames, the usual case: one read holds
// many). None when it does not (nothing consumed: the part-by-part path takes it).
std::optional<DecodeEvent> WireDecoder::feed_whole(std::span<const std::byte>& in) {
  const auto head = in.first<kPreambleSize>();
  auto p = decode_preamble(head, options_.limits);
  if (!p) {
    stats_.bytes += kPreambleSize;
    in = in.subspan(kPreambleSize);
    return fail(p.error());
  }
  const Preamble& pre = p.value();
  const std::size_t payload = pre.payload_size();
  const std::size_t total = kPreambleSize + payload + pre.epilogue_size();
  if (in.size() < total) return std::nullopt;
  const std::byte* src = in.data() + kPreambleSize;
  // Alignment 0 or 1 everywhere (each is 0 or a power of two: their OR is at most 1): the
  // wire's back-to-back layout is what allocate() would build, so the segments can stay
  // where they are.
  const bool borrow = options_.borrow && (pre.alignments[0] | pre.alignments[1] |
                                          pre.alignments[2] | pre.alignments[3]) <= 1;
  if (borrow) {
    frame_.borrow(pre, src);
  } else {
    frame_.allocate(pre);  // bounded: decode_preamble checked the sum of the lengths
  }
  const std::byte* epilogue = src + payload;
  stats_.bytes += total;
  in = in.subspan(total);
  std::array<std::span<const std::byte>, kMaxSegments> segs;
  for (std::size_t i = 0; i < pre.segment_count; ++i) {
    segs[i] = {src, pre.lengths[i]};
    src += pre.lengths[i];
    if (!borrow && !segs[i].empty()) {
      std::memcpy(frame_.storage(i).data(), segs[i].data(), segs[i].size());
    }
  }
  // All the segments' CRCs in one call (crc32c of an empty segment is 0, as the epilogue
  // says), then compared in order.
  std::array<std::uint32_t, kMaxSegments> crcs;
  crc32c_each(std::span(segs.data(), pre.segment_count), crcs.data());
  for (std::size_t i = 0; i < pre.segment_count; ++i) {
    if (wire::load_le<std::uint32_t>(epilogue + kSegmentCrcSize * i) != crcs[i]) {
      return fail(WireErrc::segment_crc);
    }
  }
  state_ = State::frame_ready;
  ++stats_.frames;
  return DecodeEvent::frame;
}

std::span<std::byte> WireDecoder::prepare() noexcept {
  if (state_ == State::frame_ready) expect(State::preamble, kPreambleSize);
  return target();
}

DecodeEvent WireDecoder::commit(std::size_t n) {
  if (state_ == State::failed) return DecodeEvent::error;
  if (state_ == State::frame_ready) expect(State::preamble, kPreambleSize);
  return advance(std::min(n, target().size()));
}

DecodeEvent WireDecoder::advance(std::size_t n) {
  if (state_ == State::segment) {
    crcs_[segment_] = crc32c(target().first(n), crcs_[segment_]);
  }
  have_ += n;
  stats_.bytes += n;
  return have_ == need_ ? step() : DecodeEvent::need_more;
}

DecodeEvent WireDecoder::finish() {
  if (state_ == State::failed) return DecodeEvent::error;
  const bool between = state_ == State::frame_ready ||
                       ((state_ == State::preamble || state_ == State::banner_magic) && have_ == 0);
  return between ? DecodeEvent::need_more : fail(WireErrc::truncated);
}

Frame WireDecoder::take_frame() noexcept {
  if (state_ != State::frame_ready) return {};
  expect(State::preamble, kPreambleSize);
  if (frame_.borrowed()) {  // the storage block stays here for the next frame that needs one
    Frame f;
    f.preamble_ = frame_.preamble_;
    f.offsets_ = frame_.offsets_;
    f.view_ = std::exchange(frame_.view_, nullptr);
    return f;
  }
  return std::move(frame_);
}

void WireDecoder::recycle(Frame&& f) noexcept {
  // Only into a frame with no block: one still being filled keeps its own.
  if (frame_.storage_ || !f.storage_ || f.capacity_ > kRecycleMax) return;
  if (state_ == State::segment || state_ == State::epilogue) return;
  frame_.storage_ = std::move(f.storage_);
  frame_.capacity_ = f.capacity_;
  f.capacity_ = 0;
}

DecodeEvent WireDecoder::fail(std::error_code ec) {
  state_ = State::failed;
  error_ = ec;
  if (ec.category() == wire_category() && ec.value() > 0 &&
      static_cast<std::size_t>(ec.value()) < kWireErrcCount) {
    ++stats_.errors[static_cast<std::size_t>(ec.value())];
  }
  return DecodeEvent::error;
}

DecodeEvent WireDecoder::step() {
  switch (state_) {
    case State::banner_magic:
      if (!std::equal(kBannerMagic.begin(), kBannerMagic.end(), staging_.begin())) {
        return fail(WireErrc::bad_magic);
      }
      expect(State::banner_head, kBannerFixedSize);
      return DecodeEvent::need_more;
    case State::banner_head:
      return on_banner_head();
    case State::banner_rest:
      return on_banner_rest();
    case State::preamble:
      return on_preamble();
    case State::segment:
      ++segment_;
      return next_segment();
    case State::epilogue:
      return on_epilogue();
    case State::frame_ready:
    case State::failed:
      break;
  }
  return DecodeEvent::need_more;
}

DecodeEvent WireDecoder::on_banner_head() {
  const auto ext = wire::load_le<std::uint16_t>(staging_.data() + 12);
  if (ext > kMaxBannerExtension) return fail(WireErrc::bad_banner);
  expect(State::banner_rest, kBannerFixedSize + ext + 4);
  return DecodeEvent::need_more;
}

DecodeEvent WireDecoder::on_banner_rest() {
  const std::size_t crc_at = need_ - 4;
  const auto crc = wire::load_le<std::uint32_t>(staging_.data() + crc_at);
  if (crc32c(std::span<const std::byte>(staging_.data(), crc_at)) != crc) {
    return fail(WireErrc::bad_banner);
  }
  peer_.version_min = wire::load_le<std::uint16_t>(staging_.data() + 8);
  peer_.version_max = wire::load_le<std::uint16_t>(staging_.data() + 10);
  peer_.supported = wire::load_le<std::uint64_t>(staging_.data() + 16);
  peer_.required = wire::load_le<std::uint64_t>(staging_.data() + 24);
  const auto ext =
      std::span<const std::byte>(staging_.data() + kBannerFixedSize, crc_at - kBannerFixedSize);
  if (auto r = decode_banner_extension(ext, peer_); !r) return fail(r.error());
  banner_size_ = need_;
  auto n = negotiate(options_.local, peer_);
  if (!n) return fail(n.error());
  negotiated_ = n.value();
  ++stats_.banners;
  banner_done_ = true;
  expect(State::preamble, kPreambleSize);
  return DecodeEvent::banner;
}

DecodeEvent WireDecoder::on_preamble() {
  auto p = decode_preamble(
      std::span<const std::byte, kPreambleSize>(staging_.data(), kPreambleSize), options_.limits);
  if (!p) return fail(p.error());
  frame_.allocate(p.value());  // bounded: decode_preamble checked the sum of the lengths
  crcs_ = {};
  segment_ = 0;
  return next_segment();
}

DecodeEvent WireDecoder::next_segment() {
  const auto& p = frame_.preamble_;
  while (segment_ < p.segment_count && p.lengths[segment_] == 0) ++segment_;
  if (segment_ < p.segment_count) {
    state_ = State::segment;
    need_ = p.lengths[segment_];
    have_ = 0;
    return DecodeEvent::need_more;
  }
  if (p.segment_count == 0) {
    state_ = State::frame_ready;
    ++stats_.frames;
    return DecodeEvent::frame;
  }
  expect(State::epilogue, p.epilogue_size());
  return DecodeEvent::need_more;
}

DecodeEvent WireDecoder::on_epilogue() {
  const auto& p = frame_.preamble_;
  for (std::size_t i = 0; i < p.segment_count; ++i) {
    if (wire::load_le<std::uint32_t>(staging_.data() + kSegmentCrcSize * i) != crcs_[i]) {
      return fail(WireErrc::segment_crc);
    }
  }
  state_ = State::frame_ready;
  ++stats_.frames;
  return DecodeEvent::frame;
}

}  // namespace rmsg::wire
