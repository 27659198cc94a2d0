// The key-value example's typed bodies and their codec: what a service defines once and
// both its server and its clients include. A body is its fields, each a little-endian u32
// length and that many bytes; every read is bounds-checked, so a malformed body decodes to
// nullopt, never to a crash or an over-read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kv {

// RPC method numbers (the wire names methods by number).
// kNote: one-way, a body of one field (what the client did).
enum Method : std::uint32_t { kPut = 1, kGet = 2, kNote = 3 };
// The server's node id, which its clients name it by (theirs: rmsg::generate_node_id()).
inline constexpr std::uint64_t kServerNode = 1;
// RpcResponder::error codes of this service.
enum AppError : std::uint32_t { kMalformed = 1 };

struct PutRequest {
  std::string key, value;
};
struct GetRequest {
  std::string key;
};
struct GetReply {
  bool found = false;
  std::string value;
};

inline std::vector<std::byte> fields(std::initializer_list<std::string_view> parts) {
  std::vector<std::byte> out;
  for (const std::string_view s : parts) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(s.size() >> (8 * i)));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out.insert(out.end(), p, p + s.size());
  }
  return out;
}
// Exactly `n` fields and nothing after them, or nullopt.
inline std::optional<std::vector<std::string>> fields(std::span<const std::byte> in,
                                                      std::size_t n) {
  std::vector<std::string> out;
  while (out.size() < n) {
    if (in.size() < 4) return std::nullopt;
    std::size_t len = 0;
    for (int i = 0; i < 4; ++i) len |= std::to_integer<std::size_t>(in[i]) << (8 * i);
    if (in.size() - 4 < len) return std::nullopt;
    out.emplace_back(reinterpret_cast<const char*>(in.data() + 4), len);
    in = in.subspan(4 + len);
  }
  if (!in.empty()) return std::nullopt;
  return out;
}

inline std::vector<std::byte> encode(const PutRequest& r) {
  return fields({r.key, r.value});
}
inline std::vector<std::byte> encode(const GetRequest& r) {
  return fields({r.key});
}
inline std::vector<std::byte> encode(const GetReply& r) {
  return fields({r.found ? "1" : "0", r.value});
}

inline std::optional<PutRequest> decode_put(std::span<const std::byte> body) {
  auto f = fields(body, 2);
  return f ? std::optional(PutRequest{(*f)[0], (*f)[1]}) : std::nullopt;
}
inline std::optional<GetRequest> decode_get(std::span<const std::byte> body) {
  auto f = fields(body, 1);
  return f ? std::optional(GetRequest{(*f)[0]}) : std::nullopt;
}
inline std::optional<GetReply> decode_get_reply(std::span<const std::byte> body) {
  auto f = fields(body, 2);
  if (!f || ((*f)[0] != "0" && (*f)[0] != "1")) return std::nullopt;
  return GetReply{(*f)[0] == "1", (*f)[1]};
}

}  // namespace kv
