#include "msg/rpc_wire.h"

#include <array>

#include "msg/frame_bytes.h"

namespace rmsg::msg {
namespace {

template <class T>
void put(std::byte* at, T v) noexcept {
  wire::store_le<T>(at, v);
}
template <class T>
T get(const std::byte* at) noexcept {
  return wire::load_le<T>(at);
}

}  // namespace

std::vector<std::byte> encode_rpc(const RpcHeader& h, std::span<const std::byte> body) {
  std::vector<std::byte> out;
  encode_rpc_to(h, body, out);
  return out;
}

void encode_rpc_to(const RpcHeader& h, std::span<const std::byte> body,
                   std::vector<std::byte>& out) {
  std::array<std::byte, RpcHeader::kSize> head;
  std::byte* p = head.data();
  p[0] = static_cast<std::byte>(h.kind);
  p[1] = static_cast<std::byte>(h.flags);
  p[2] = static_cast<std::byte>(h.status);
  p[3] = std::byte{0};
  put<std::uint32_t>(p + 4, h.word);
  put<std::uint64_t>(p + 8, h.id);
  put<std::uint64_t>(p + 16, h.budget_us);
  // Appended, not resized: nothing is zeroed first.
  out.clear();
  out.reserve(RpcHeader::kSize + body.size());
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), body.begin(), body.end());
}

std::optional<RpcHeader> decode_rpc(std::span<const std::byte> payload) noexcept {
  if (payload.size() < RpcHeader::kSize) return std::nullopt;
  const std::byte* p = payload.data();
  const auto kind = static_cast<std::uint8_t>(p[0]);
  const auto status = static_cast<std::uint8_t>(p[2]);
  if (kind < 1 || kind > 4 || status > 5 || p[3] != std::byte{0}) return std::nullopt;
  RpcHeader h;
  h.kind = static_cast<RpcKind>(kind);
  h.flags = static_cast<std::uint8_t>(p[1]);
  h.status = static_cast<RpcStatus>(status);
  h.word = get<std::uint32_t>(p + 4);
  h.id = get<std::uint64_t>(p + 8);
  h.budget_us = get<std::uint64_t>(p + 16);
  return h;
}

}  // namespace rmsg::msg
