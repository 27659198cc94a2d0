// The key-value example's typed bodies and their codec: what a service defines once and
// both its server and its clients include. Fields are little-endian u32 lengths followed
// by bytes; every read is bounds-checked, so a malformed body decodes to nullopt, never
// to a crash or an over-read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kv {

// RPC method numbers (the wire names methods by number).
enum Method : std::uint32_t { kPut = 1, kGet = 2 };
// RpcResponder::error codes of this service.
enum AppError : std::uint32_t { kMalformed = 1 };

struct PutRequest {
  std::string key;
  std::string value;
};
struct GetRequest {
  std::string key;
};
struct GetReply {
  bool found = false;
  std::string value;
};

class Writer {
 public:
  Writer& u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
    return *this;
  }
  Writer& str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
    return *this;
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  std::uint32_t u32() {
    if (!take(4)) return 0;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::to_integer<std::uint32_t>(last_[i]) << (8 * i);
    return v;
  }
  std::string str() {
    const std::uint32_t n = u32();
    if (!take(n)) return {};
    return {reinterpret_cast<const char*>(last_.data()), last_.size()};
  }
  // True when every read fitted and nothing is left over.
  bool complete() const { return ok_ && in_.empty(); }

 private:
  bool take(std::size_t n) {
    if (!ok_ || in_.size() < n) {
      ok_ = false;
      return false;
    }
    last_ = in_.first(n);
    in_ = in_.subspan(n);
    return true;
  }
  std::span<const std::byte> in_;
  std::span<const std::byte> last_;
  bool ok_ = true;
};

inline std::vector<std::byte> encode(const PutRequest& r) {
  return Writer().str(r.key).str(r.value).take();
}
inline std::vector<std::byte> encode(const GetRequest& r) {
  return Writer().str(r.key).take();
}
inline std::vector<std::byte> encode(const GetReply& r) {
  return Writer().u32(r.found ? 1 : 0).str(r.value).take();
}

template <class T>
std::optional<T> decode(std::span<const std::byte> body);

template <>
inline std::optional<PutRequest> decode(std::span<const std::byte> body) {
  Reader in(body);
  PutRequest r{in.str(), in.str()};
  return in.complete() ? std::optional(std::move(r)) : std::nullopt;
}
template <>
inline std::optional<GetRequest> decode(std::span<const std::byte> body) {
  Reader in(body);
  GetRequest r{in.str()};
  return in.complete() ? std::optional(std::move(r)) : std::nullopt;
}
template <>
inline std::optional<GetReply> decode(std::span<const std::byte> body) {
  Reader in(body);
  const std::uint32_t found = in.u32();
  GetReply r{found == 1, in.str()};
  return in.complete() && found <= 1 ? std::optional(std::move(r)) : std::nullopt;
}

}  // namespace kv
