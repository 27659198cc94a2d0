#include "wire/session_frames.h"

#include "wire/frame_bytes.h"

namespace rmsg::wire {
namespace {

// Little-endian field writer/reader over a fixed buffer (the layouts are fixed, so every
// offset is known at compile time of the caller's sequence).
class Writer {
 public:
  explicit Writer(std::span<std::byte> out) noexcept : out_(out) {}
  void u32(std::uint32_t v) noexcept { put(v); }
  void u64(std::uint64_t v) noexcept { put(v); }

 private:
  // The callers' layouts fit their buffers (Encoded<T> is T::kSize bytes).
  template <class T>
  void put(T v) noexcept {
    wire::store_le<T>(out_.data() + pos_, v);
    pos_ += sizeof v;
  }
  std::span<std::byte> out_;
  std::size_t pos_ = 0;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) noexcept : in_(in) {}
  std::uint32_t u32() noexcept { return get<std::uint32_t>(); }
  std::uint64_t u64() noexcept { return get<std::uint64_t>(); }

 private:
  // The callers checked the length against the layout first.
  template <class T>
  T get() noexcept {
    const T v = wire::load_le<T>(in_.data() + pos_);
    pos_ += sizeof v;
    return v;
  }
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
};

}  // namespace

Encoded<Hello> encode(const Hello& h) noexcept {
  Encoded<Hello> out{};
  Writer w(out);
  w.u64(h.node);
  w.u64(h.target);
  w.u64(h.client_cookie);
  w.u64(h.server_cookie);
  w.u64(h.global_seq);
  w.u64(h.connect_seq);
  w.u64(h.msg_seq);
  w.u32(h.flags);
  w.u32(0);
  return out;
}

Encoded<Welcome> encode(const Welcome& v) noexcept {
  Encoded<Welcome> out{};
  Writer w(out);
  w.u64(v.node);
  w.u64(v.cookie);
  w.u64(v.connect_seq);
  w.u64(v.msg_seq);
  w.u32(v.flags);
  w.u32(0);
  return out;
}

Encoded<Value64> encode(const Value64& v) noexcept {
  Encoded<Value64> out{};
  Writer(out).u64(v.value);
  return out;
}

Encoded<Reason> encode(const Reason& r) noexcept {
  Encoded<Reason> out{};
  Writer w(out);
  w.u32(static_cast<std::uint32_t>(r.reason));
  w.u32(0);
  return out;
}

Encoded<MessageHeader> encode(const MessageHeader& m) noexcept {
  Encoded<MessageHeader> out{};
  Writer w(out);
  w.u64(m.seq);
  w.u64(m.ack);
  w.u32(m.flags);
  w.u32(m.service);  // bytes 20..21 the service, 22..23 reserved (0)
  return out;
}

Result<Hello> decode_hello(std::span<const std::byte> b) noexcept {
  if (b.size() < Hello::kSize) return make_error_code(Errc::protocol_error);
  Reader r(b);
  Hello h;
  h.node = r.u64();
  h.target = r.u64();
  h.client_cookie = r.u64();
  h.server_cookie = r.u64();
  h.global_seq = r.u64();
  h.connect_seq = r.u64();
  h.msg_seq = r.u64();
  h.flags = r.u32();
  return h;
}

Result<Welcome> decode_welcome(std::span<const std::byte> b) noexcept {
  if (b.size() < Welcome::kSize) return make_error_code(Errc::protocol_error);
  Reader r(b);
  Welcome w;
  w.node = r.u64();
  w.cookie = r.u64();
  w.connect_seq = r.u64();
  w.msg_seq = r.u64();
  w.flags = r.u32();
  return w;
}

Result<Value64> decode_value64(std::span<const std::byte> b) noexcept {
  if (b.size() < Value64::kSize) return make_error_code(Errc::protocol_error);
  return Value64{Reader(b).u64()};
}

Result<Reason> decode_reason(std::span<const std::byte> b) noexcept {
  if (b.size() < Reason::kSize) return make_error_code(Errc::protocol_error);
  return Reason{static_cast<CloseReason>(Reader(b).u32())};
}

}  // namespace rmsg::wire
