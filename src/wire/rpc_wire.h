// The RPC header at the front of a messenger message (docs/protocol.md, Messenger RPC):
// 24 bytes, little-endian, then the body. Pure codecs.
//
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "wire/frame_bytes.h"

namespace rmsg::wire {

enum class RpcKind : std::uint8_t { request = 1, reply = 2, cancel = 3, oneway = 4 };

// Reply statuses (the RpcErrc values 1-5; 0 ok).
enum class RpcStatus : std::uint8_t {
  ok = 0,
  handler_error = 1,
  unknown_method = 2,
  too_large = 3,
  shutting_down = 4,
  timeout = 5,
};

inline constexpr std::uint8_t kRpcFlagDedupe = 1;  // request: a retry of this id (retry_of)
inline constexpr std::uint64_t kNoBudget = ~std::uint64_t{0};

struct RpcHeader {
  static constexpr std::size_t kSize = 24;
  RpcKind kind = RpcKind::request;
  std::uint8_t flags = 0;
  RpcStatus status = RpcStatus::ok;  // reply only
  std::uint32_t word = 0;            // request, oneway: method; reply: app code
  std::uint64_t id = 0;              // request, reply, cancel: the call id
  std::uint64_t budget_us = 0;       // request: remaining budget (kNoBudget: none)
};

// The header followed by `body` (one allocation).
std::vector<std::byte> encode_rpc(const RpcHeader& h, std::span<const std::byte> body);
// The same into `out` (its contents replaced, its capacity reused: a pooled buffer).
void encode_rpc_to(const RpcHeader& h, std::span<const std::byte> body,
                   std::vector<std::byte>& out);
// Null for a payload that is not a well-formed RPC message (too short, unknown kind or
// status, a non-zero reserved byte). Inline: every message received decodes one.
inline std::optional<RpcHeader> decode_rpc(std::span<const std::byte> payload) noexcept {
  if (payload.size() < RpcHeader::kSize) return std::nullopt;
  const std::byte* p = payload.data();
  const auto kind = static_cast<std::uint8_t>(p[0]);
  const auto status = static_cast<std::uint8_t>(p[2]);
  if (kind < 1 || kind > 4 || status > 5 || p[3] != std::byte{0}) return std::nullopt;
  RpcHeader h;
  h.kind = static_cast<RpcKind>(kind);
  h.flags = static_cast<std::uint8_t>(p[1]);
  h.status = static_cast<RpcStatus>(status);
  h.word = wire::load_le<std::uint32_t>(p + 4);
  h.id = wire::load_le<std::uint64_t>(p + 8);
  h.budget_us = wire::load_le<std::uint64_t>(p + 16);
  return h;
}

}  // namespace rmsg::wire
