#include "wire/rpc_wire.h"

#include <array>

#include "wire/frame_bytes.h"

namespace rmsg::wire {
namespace {

template <class T>
void put(std::byte* at, T v) noexcept {
  wire::store_le<T>(at, v);
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

}  // namespace rmsg::wire
