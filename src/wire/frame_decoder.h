// The messenger's receive side: a pure bytes-in, events-out state machine for the peer's
// banner and then its frames (banner.h, frame.h). No I/O, no clock, no callbacks: the
// session feeds it whatever it read, in chunks of any size (one byte at a time works), and
// acts on the events. It allocates only a frame's segment storage, and only after the
// preamble passed every check of frame.h (CRC first, then the size limit), and not even
// then when a recycled frame's block is large enough (recycle()).
//
// Use:
//   DecoderOptions opts;
//   opts.local = my_banner;                               // and opts.limits
//   WireDecoder dec(opts);
//   for each chunk read from the stream:
//     std::span<const std::byte> in = chunk;
//     while (!in.empty()) switch (dec.feed(in)) {       // feed() advances `in`
//       case DecodeEvent::need_more: break;              // `in` is empty now
//       case DecodeEvent::banner: use dec.negotiated(); break;
//       case DecodeEvent::frame:  handle(dec.take_frame()); break;
//       case DecodeEvent::error:  close with dec.error(); return;
//     }
//   at end of stream: dec.finish() (truncated when it ended inside a banner or frame).
// Instead of feed(), prepare()/commit() let the caller read straight into the decoder's
// buffers (segments land in the frame's storage: no copy).
//
// Errors are WireErrc codes, sticky: after the first, every call returns error and the
// decoder consumes nothing more. Each error is counted once in stats().
//
// Threading: one thread at a time (the connection's loop thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <system_error>
#include <utility>

#include "wire/banner.h"
#include "wire/frame.h"
#include "wire/frame_errors.h"

namespace rmsg::wire {

namespace detail {
struct AlignedDelete {  // for storage from ::operator new(size, align_val_t)
  std::size_t alignment = 0;
  void operator()(std::byte* p) const noexcept;
};
}  // namespace detail

// A received frame: type, flags, and its segments in one allocation, each segment at an
// address that is a multiple of its alignment (at least alignof(std::max_align_t) for the
// allocation itself). Move-only; owns its storage - except a borrowed frame
// (DecoderOptions::borrow), whose segments point into the bytes the decoder was fed and are
// valid only while those are (a moved-from frame, borrowed or not, has no segments).
class Frame {
 public:
  Frame() = default;
  Frame(Frame&& o) noexcept { *this = std::move(o); }
  Frame& operator=(Frame&& o) noexcept {
    preamble_ = o.preamble_;
    offsets_ = o.offsets_;
    storage_ = std::move(o.storage_);
    capacity_ = std::exchange(o.capacity_, 0);
    view_ = std::exchange(o.view_, nullptr);
    return *this;
  }
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;
  ~Frame() = default;

  FrameType type() const noexcept { return preamble_.type; }
  std::uint8_t flags() const noexcept { return preamble_.flags; }
  std::size_t segment_count() const noexcept { return preamble_.segment_count; }
  // Segment i < segment_count(); an empty span for i beyond it (and for a moved-from frame).
  std::span<const std::byte> segment(std::size_t i) const noexcept {
    if (i >= preamble_.segment_count || preamble_.lengths[i] == 0) return {};
    const std::byte* base = view_ != nullptr ? view_ : storage_.get();
    if (base == nullptr) return {};
    return {base + offsets_[i], preamble_.lengths[i]};
  }
  // The alignment the sender asked for segment i (0: none), as in the preamble.
  std::uint16_t alignment(std::size_t i) const noexcept {
    return i < kMaxSegments ? preamble_.alignments[i] : 0;
  }
  std::size_t payload_size() const noexcept { return preamble_.payload_size(); }
  // Whether the segments point into the decoder's input instead of storage of its own.
  bool borrowed() const noexcept { return view_ != nullptr; }
  // Whether it holds a storage block (WireDecoder::recycle can use it).
  bool owns_storage() const noexcept { return storage_ != nullptr; }

 private:
  friend class WireDecoder;
  // Storage for the preamble's segments (already validated and bounded): the block it has
  // when that is large and aligned enough (WireDecoder::recycle), else a new one.
  void allocate(const Preamble& p);
  // The segments lie back to back at `at` (no segment asks for an alignment): point there.
  // The storage block stays for the next frame that needs one.
  void borrow(const Preamble& p, const std::byte* at) noexcept;
  std::span<std::byte> storage(std::size_t i) noexcept;  // segment i in storage_ (decoder)
  Preamble preamble_{};
  std::array<std::size_t, kMaxSegments> offsets_{};
  std::unique_ptr<std::byte[], detail::AlignedDelete> storage_;
  std::size_t capacity_ = 0;         // bytes of storage_
  const std::byte* view_ = nullptr;  // borrowed: where segment 0 starts
};

struct DecoderOptions {
  Banner local;               // ours: the peer's banner is negotiated against it
  FrameLimits limits;         // what we accept
  bool expect_banner = true;  // false: frames from the first byte (tests, fuzzing)
  // A frame that lies whole in the span given to one feed() and whose segments ask for no
  // alignment is not copied: its segments point into that span (Frame::borrowed()), so
  // the caller keeps those bytes unchanged until it is done with the frame. Off: every
  // frame owns its bytes.
  bool borrow = false;
};

enum class DecodeEvent : std::uint8_t {
  need_more,  // consumed everything given; no event completed
  banner,     // the peer's banner arrived and negotiation succeeded: negotiated()
  frame,      // a frame is complete: take_frame()
  error,      // fatal for this connection: error()
};

class WireDecoder {
 public:
  explicit WireDecoder(DecoderOptions options = {});

  // Consumes bytes from the front of `in` until an event completes or `in` runs out, and
  // advances `in` past them. After banner/frame, call again with the rest of `in`.
  DecodeEvent feed(std::span<const std::byte>& in);

  // Zero-copy alternative to feed(): the buffer the next bytes belong in (never empty,
  // except after an error), then commit(n) once n <= prepare().size() bytes were written
  // there. prepare() never spans two parts (banner, preamble, one segment, epilogue), so a
  // read into it is short by design; feed() is the fewer-syscalls path for small frames.
  std::span<std::byte> prepare() noexcept;
  DecodeEvent commit(std::size_t n);

  // End of stream: error (truncated) when it ended inside a banner or frame, else need_more.
  DecodeEvent finish();

  const Banner& peer_banner() const noexcept { return peer_; }  // after `banner`
  // The peer's banner, every byte as received (the authentication transcript): valid at
  // the `banner` event only, until the next feed()/prepare()/commit().
  std::span<const std::byte> peer_banner_bytes() const noexcept {
    return {staging_.data(), banner_size_};
  }
  const Negotiated& negotiated() const noexcept { return negotiated_; }
  // Whether the peer's banner was accepted (frames follow).
  bool banner_done() const noexcept { return banner_done_; }
  // The completed frame, once per `frame` event (a frame not taken before the next
  // feed()/prepare()/commit() is dropped).
  Frame take_frame() noexcept;
  // Hands a taken frame back once its bytes are no longer used: its storage (up to
  // kRecycleMax bytes) serves the next frame, so small frames cost no allocation each.
  void recycle(Frame&& f) noexcept;
  static constexpr std::size_t kRecycleMax = std::size_t{16} << 10;
  std::error_code error() const noexcept { return error_; }
  const WireStats& stats() const noexcept { return stats_; }

 private:
  enum class State : std::uint8_t {
    banner_magic,  // the first 8 banner bytes: a wrong magic fails before anything else
    banner_head,   // the rest of its fixed 32 bytes
    banner_rest,   // extension + CRC
    preamble,
    segment,  // segment_ of the current frame
    epilogue,
    frame_ready,  // take_frame() pending; the next feed starts a preamble
    failed,
  };
  std::span<std::byte> target() noexcept;  // where the current part's next bytes go
  DecodeEvent advance(std::size_t n);      // n bytes were written to target()
  DecodeEvent step();                      // the current part is complete
  DecodeEvent fail(std::error_code ec);
  std::optional<DecodeEvent> feed_whole(std::span<const std::byte>& in);  // feed()'s fast path
  void expect(State s, std::size_t need) noexcept;  // a staging part of `need` bytes
  DecodeEvent on_banner_head();
  DecodeEvent on_banner_rest();
  DecodeEvent on_preamble();
  DecodeEvent next_segment();  // from segment_ on: the next non-empty one, or the epilogue
  DecodeEvent on_epilogue();

  DecoderOptions options_;
  State state_;
  // Banner, preamble and epilogue bytes collect here; segments go to frame_'s storage.
  std::array<std::byte, kMaxBannerExtension + kBannerFixedSize + 4> staging_{};
  std::size_t need_ = 0;  // where the current part ends (staging offset, or segment length)
  std::size_t have_ = 0;  // how far it is filled
  std::size_t segment_ = 0;
  std::array<std::uint32_t, kMaxSegments> crcs_{};
  Banner peer_{};
  Negotiated negotiated_{};
  bool banner_done_ = false;
  std::size_t banner_size_ = 0;
  Frame frame_;
  std::error_code error_;
  WireStats stats_;
};

}  // namespace rmsg::wire
